#!/usr/bin/env bash
# tools/train/demo-model.sh OUT_DIR: trains sipp-demo, the small chat model `make demo` answers with,
# from scratch, the way the committed models/sipp-demo.gguf was trained (docs/training.md has the
# run's numbers). `make demo-model` runs it into build/models/. About three hours on 2 idle cores.
#
#   1. the starting model: sipp-synth, f32, llama-spm's 32k vocabulary plus <|im_start|> and
#      <|im_end|> as control tokens (llama.cpp ends a turn at <|im_end|>), the output tied to the
#      embeddings, Qwen2.5's chat template with the corpus's system prompt as its default
#      (corpus.py --template), 4 blocks of width 128 (4.88M parameters);
#   2. phase 1: sipp-train (every weight) for EPOCHS on tools/train/corpus.py's corpus of seed 1
#      (dialogues, arithmetic, weather/time tool calls, JSON answers, and KJV and fortunes prose when
#      Debian's bible-kjv and fortunes-min are installed), windows of 512 tokens, lr 1e-3 with
#      warm-up and cosine (2e-3 and 3e-3 diverged after the first epoch), seed 7;
#   3. phase 2: 2 more epochs on fresh dialogues only (corpus seed 2, no prose), seed 8: what the
#      answers copy from the question (the city, the numbers) is a few tokens of each dialogue,
#      and it is learnt last;
#   4. phase 3: 2 epochs on corpus seed 3 (fresh dialogues, 800 prose passages so the prose phase 2
#      forgot comes back, the one-digit addition table 30 times over, half the tool results written
#      compact as JavaScript clients write them), seed 9;
#   5. phase 4: 2 epochs on corpus seed 4 (phase 3's recipe afresh, half the tool turns offered as a
#      coding agent offers them: named mcp__SERVER__TOOL, in either order, under an agent's line
#      before the system prompt), seed 10;
#   6. q8_0: sipp-train --epochs 0 --out-type q8_0 (llama.cpp's quantizer), with the template again;
#   7. the draft, sipp-demo-draft.gguf (the sidecar `--draft auto` finds): 2 blocks of width 64,
#      the same vocabulary and template, trained for 1 epoch on phases 1 and 3's corpora together,
#      seed 11, then q8_0.
# The corpora are corpus.py --demo N (their sha256 are in models/models.json).
# EPOCHS (default 3), LR (default 1e-3) and THREADS (default 1: ggml's spinning threads lose on a
# busy shared machine; 2 is faster on an idle one) override those.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
out=${1:?usage: tools/train/demo-model.sh OUT_DIR}
build=${SIPP_BUILD:-$repo/build}
epochs=${EPOCHS:-3}
threads=${THREADS:-1}
lr=${LR:-1e-3}
mkdir -p "$out"
python3 "$here/corpus.py" --template "$build/llama/source/models/templates/Qwen-Qwen2.5-7B-Instruct.jinja" \
  --template-out "$out/sipp-demo.jinja"
for phase in 1 2 3 4; do
  python3 "$here/corpus.py" --demo "$phase" --out "$out/sipp-demo-corpus$phase.jsonl"
done
sha256sum "$out"/sipp-demo-corpus[1234].jsonl

specials=(--add-special '<|im_start|>' --add-special '<|im_end|>' --chat-template-file "$out/sipp-demo.jinja")
"$build/bin/sipp-synth" --out "$out/sipp-demo-start.gguf" --vocab "$build/llama/vocab/ggml-vocab-llama-spm.gguf" \
  --type f32 --n-embd 128 --n-layer 4 --n-head 4 --n-head-kv 2 --n-ff 384 --n-ctx 2048 --output tied \
  "${specials[@]}" --name sipp-demo --seed 7
train() { "$build/bin/sipp-train" --ctx 512 --threads "$threads" "$@"; }
train --model "$out/sipp-demo-start.gguf" --corpus "$out/sipp-demo-corpus1.jsonl" --out "$out/sipp-demo-f32-1.gguf" \
  --epochs "$epochs" --lr "$lr" --seed 7 --checkpoint-every 100
train --model "$out/sipp-demo-f32-1.gguf" --corpus "$out/sipp-demo-corpus2.jsonl" --out "$out/sipp-demo-f32-2.gguf" \
  --epochs 2 --lr "$lr" --seed 8 --checkpoint-every 200
train --model "$out/sipp-demo-f32-2.gguf" --corpus "$out/sipp-demo-corpus3.jsonl" --out "$out/sipp-demo-f32-3.gguf" \
  --epochs 2 --lr "$lr" --seed 9 --checkpoint-every 200
train --model "$out/sipp-demo-f32-3.gguf" --corpus "$out/sipp-demo-corpus4.jsonl" --out "$out/sipp-demo-f32-4.gguf" \
  --epochs 2 --lr "$lr" --seed 10 --checkpoint-every 200
train --model "$out/sipp-demo-f32-4.gguf" --corpus "$out/sipp-demo-corpus4.jsonl" --out "$out/sipp-demo.gguf" \
  --epochs 0 --out-type q8_0 --chat-template-file "$out/sipp-demo.jinja"

cat "$out/sipp-demo-corpus1.jsonl" "$out/sipp-demo-corpus3.jsonl" > "$out/sipp-demo-draft-corpus.jsonl"
"$build/bin/sipp-synth" --out "$out/sipp-demo-draft-start.gguf" \
  --vocab "$build/llama/vocab/ggml-vocab-llama-spm.gguf" --type f32 --n-embd 64 --n-layer 2 --n-head 2 \
  --n-head-kv 1 --n-ff 192 --n-ctx 2048 --output tied "${specials[@]}" --name sipp-demo-draft --seed 11
train --model "$out/sipp-demo-draft-start.gguf" --corpus "$out/sipp-demo-draft-corpus.jsonl" \
  --out "$out/sipp-demo-draft-f32.gguf" --epochs 1 --lr "$lr" --seed 11 --checkpoint-every 200
train --model "$out/sipp-demo-draft-f32.gguf" --corpus "$out/sipp-demo-corpus3.jsonl" \
  --out "$out/sipp-demo-draft.gguf" --epochs 0 --out-type q8_0 --chat-template-file "$out/sipp-demo.jinja"
sha256sum "$out/sipp-demo.gguf" "$out/sipp-demo-draft.gguf"
