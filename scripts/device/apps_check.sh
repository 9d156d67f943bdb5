#!/usr/bin/env bash
# On the H200 machine (after . scripts/device/setup_remote.sh): tutorial lessons 9 and 10 and the
# family apps (apps/*/README.md) on the GPU libraries, each with its exit status and its summary
# lines; full logs into $OUT. Packed by scripts/device/prepare.sh.
out=${OUT:-/tmp}
run() {
  local name=$1
  shift
  timeout 300 "$@" > "$out/$name.txt" 2>&1
  echo "== $name (exit $?)"
  grep -E "backend:|check vs|time \(|GPU library|no GPU|WRONG|returned -[0-9]|rror|Success" "$out/$name.txt" | head -8
}
run lesson_09_generator .devrun/lesson_09_generator
run lesson_10_custom_score_modifier .devrun/lesson_10_custom_score_modifier
run attention_prefill .devrun/attention
run attention_prefill_gqa .devrun/attention --shape 2,1000 --heads 32,8
run attention_decode .devrun/attention --mode decode
run softmax .devrun/softmax
run logsumexp .devrun/softmax --op logsumexp
run layernorm .devrun/layernorm
run rmsnorm .devrun/layernorm --op rmsnorm
