#!/usr/bin/env bash
# tools/train/demo-model.sh OUT_DIR: trains sipp-demo, the small chat model `make demo` answers with,
# from scratch, the way the committed models/sipp-demo.gguf was trained (docs/training.md has the
# run's numbers). `make demo-model` runs it into build/models/. Hours on 2 cores.
#
#   1. a starting model: sipp-synth, f32, llama-spm's 32k vocabulary plus <|im_start|> and <|im_end|>
#      as control tokens (llama.cpp ends a turn at <|im_end|>), Qwen2.5's chat template with the
#      corpus's system prompt as its default (corpus.py --template), 4 blocks of width 128;
#   2. the corpus: tools/train/corpus.py, seed 1 (dialogues, arithmetic, weather/time tool calls,
#      JSON answers, KJV and fortunes prose when Debian's bible-kjv and fortunes-min are installed);
#   3. training: sipp-train (every weight), windows of 512 tokens, lr 1e-3 with warm-up and cosine (2e-3 and 3e-3
#      diverged after the first epoch), seed 7, one thread (ggml's spinning threads lose on a
#      shared 2-core machine);
#   4. q8_0: sipp-train --epochs 0 --out-type q8_0 (llama.cpp's quantizer), with the template again.
# EPOCHS (default 3), LR (default 1e-3) and THREADS (default 1) override those.
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
"$build/bin/sipp-synth" --out "$out/sipp-demo-start.gguf" --vocab "$build/llama/vocab/ggml-vocab-llama-spm.gguf" \
  --type f32 --n-embd 128 --n-layer 4 --n-head 4 --n-head-kv 2 --n-ff 384 --n-ctx 2048 \
  --add-special '<|im_start|>' --add-special '<|im_end|>' --chat-template-file "$out/sipp-demo.jinja" \
  --name sipp-demo --seed 7
python3 "$here/corpus.py" --out "$out/sipp-demo-corpus.jsonl" --seed 1 --dialogues 4000 --prose 400
sha256sum "$out/sipp-demo-corpus.jsonl"
"$build/bin/sipp-train" --model "$out/sipp-demo-start.gguf" --corpus "$out/sipp-demo-corpus.jsonl" \
  --out "$out/sipp-demo-f32.gguf" --epochs "$epochs" --lr "$lr" --ctx 512 --seed 7 --checkpoint-every 100 \
  --threads "$threads"
"$build/bin/sipp-train" --model "$out/sipp-demo-f32.gguf" --corpus "$out/sipp-demo-corpus.jsonl" \
  --out "$out/sipp-demo.gguf" --epochs 0 --ctx 512 --out-type q8_0 --threads "$threads" \
  --chat-template-file "$out/sipp-demo.jinja"
sha256sum "$out/sipp-demo.gguf"
