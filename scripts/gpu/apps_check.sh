#!/usr/bin/env bash
# On the GPU machine, from the repository root: tutorial lessons 9 and 10 and the family apps
# (apps/*/README.md) on the GPU libraries, each with its exit status and its summary lines; full logs
# into $OUT (default /tmp). Packed by `scripts/gpu/prepare.sh aot` (DEVRUN picks another folder; these
# programs need no libHalide).
out=${OUT:-/tmp}
bin=${DEVRUN:-.devrun-aot}
run() {
  local name=$1
  shift
  timeout 300 "$@" > "$out/$name.txt" 2>&1
  echo "== $name (exit $?)"
  grep -E "backend:|check vs|time \(|GPU library|no GPU|WRONG|returned -[0-9]|rror|Success" "$out/$name.txt" | head -8
}
run lesson_09_generator "$bin"/lesson_09_generator
run lesson_10_custom_score_modifier "$bin"/lesson_10_custom_score_modifier
run attention_prefill "$bin"/attention
run attention_prefill_gqa "$bin"/attention --shape 2,1000 --heads 32,8
run attention_decode "$bin"/attention --mode decode
run softmax "$bin"/softmax
run logsumexp "$bin"/softmax --op logsumexp
run layernorm "$bin"/layernorm
run rmsnorm "$bin"/layernorm --op rmsnorm
