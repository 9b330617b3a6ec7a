#!/usr/bin/env bash
# One prepared run on a GPU machine: GPU-marked tests, the benchmarks that fit the GPU count,
# the MFU benchmark, its step profiled by kind of kernel, and the GEMM benchmark (achieved matmul TFLOP/s by shape); results (with provenance) are written under results/ and summarised.
# Ran in about 100 s on one H200 before the profile step was added (2026-12-04; results/*-nvidia-h200.json). On a machine without a GPU every GPU part skips,
# saying why, and the script still exits 0 (that is how the test suite checks it).
#
#   usage: scripts/gpu_check.sh            (PYTHON=... to pick the interpreter, RESULTS=... the folder)
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
RESULTS=${RESULTS:-results}
QUICK=${QUICK:-0}          # 1: smallest sizes (used by the test suite on CPU)
mkdir -p "$RESULTS"
summary=()
failed=0
note() { summary+=("$1"); echo "== $1"; }
bench() {  # bench NAME OUTFILE ARGS...: run one benchmark with a time limit, keep its JSON
  local name=$1 out=$2; shift 2
  if timeout "${BENCH_TIMEOUT:-240}" "$PYTHON" -m playground.bench "$name" --json "$@" > "$out.tmp"; then
    mv "$out.tmp" "$out"; return 0
  fi
  rm -f "$out.tmp"; return 1
}

# one interpreter for both (importing torch takes seconds): the GPU count, then the first GPU's name
{ read -r ngpu; read -r device; } < <("$PYTHON" -c "import torch; n = torch.cuda.device_count() if torch.cuda.is_available() else 0
print(n); print(torch.cuda.get_device_name(0) if n else 'no GPU')")
ngpu=${ngpu:-0}; device=${device:-no GPU}
slug=$(echo "$device" | tr 'A-Z ' 'a-z-' | tr -cd 'a-z0-9-')
echo "gpu_check: $ngpu GPU(s): $device; python: $PYTHON; results in $RESULTS/"

# 1. GPU-marked tests (they skip with their reason where no GPU is present)
if "$PYTHON" -m pytest -q -p no:cacheprovider -m gpu -rs tests/test_gpu.py; then
  note "gpu tests: passed (or skipped: no GPU)"
else
  note "gpu tests: FAILED"; failed=1
fi

# 2. MFU: a real bf16 training step timed on the device
if [ "$ngpu" -ge 1 ] && [ "$QUICK" = 0 ]; then mfu_args=(); else
  mfu_args=(--hidden 128 --layers 1 --heads 2 --seq-len 64 --vocab 256 --batch 2 --steps 2 --warmup 0); fi
if bench mfu "$RESULTS/mfu-$slug.json" "${mfu_args[@]}"; then
  note "mfu: $("$PYTHON" -c "import json,sys; r=json.load(open(sys.argv[1])); print(f\"{r['achieved_tflops']} TFLOP/s achieved, MFU {r['mfu']} on {r['provenance']['device']}\")" "$RESULTS/mfu-$slug.json")"
else
  note "mfu: FAILED"; failed=1
fi

# 2a. profile: the same step traced, its device time by kind of kernel beside the step-time model's parts
if bench profile "$RESULTS/profile-$slug.json" "${mfu_args[@]}"; then
  note "profile: $("$PYTHON" -c "import json,sys; r=json.load(open(sys.argv[1])); g=r['groups_measured_over_predicted']; print('measured / predicted ' + ', '.join(f'{k} {v}' for k, v in g.items()) if g else 'by class ' + ', '.join(f'{k} {v * 1e3:.1f} ms' for k, v in r['by_class_s'].items()))" "$RESULTS/profile-$slug.json")"
else
  note "profile: FAILED"; failed=1
fi

# 2b. GEMM: achieved matmul TFLOP/s by shape (bf16 on a GPU, fp32 on a CPU); on a GPU its
#     fraction of peak is what `step_time --efficiency FILE` takes
# on a GPU the best shape is then held for 30 s, as a run holds it: the sustained share (hopper_sustained);
# and FP8 squares with fast and split accumulation: fp8_gemm, and on a Hopper fp8_split_accumulation
if [ "$ngpu" -ge 1 ] && [ "$QUICK" = 0 ]; then gemm_args=(--hold 30 --fp8); else
  gemm_args=(--sizes 128 --tokens 64 --tp 8 --repeats 2 --warmup 1); fi
if bench gemm "$RESULTS/gemm-$slug.json" "${gemm_args[@]}"; then
  note "gemm: $("$PYTHON" -c "import json,sys; r=json.load(open(sys.argv[1])); b=r['best']; f=b['fraction_of_peak']; print(f\"best {b['tflops']} TFLOP/s ({b['shape']}, {r['dtype']})\" + (f', {f} of peak' if f is not None else ', no datasheet peak') + f\" on {r['provenance']['device']}\" + (f\"; held {r['held']['seconds']:g} s: {r['held']['over_short']} of it\" if r.get('held') else '') + (f\"; FP8 {r['fp8']['efficiency']}\" if r.get('fp8') else ''))" "$RESULTS/gemm-$slug.json")"
else
  note "gemm: FAILED"; failed=1
fi

# 2c. MoE: one EP rank's routed experts at published runs' shapes, by each way the rows reach the GEMMs
if [ "$ngpu" -ge 1 ] && [ "$QUICK" = 0 ]; then moe_args=(); else moe_args=(--shapes tiny --repeats 1 --warmup 0 --layers 1); fi
if bench moe "$RESULTS/moe-$slug.json" "${moe_args[@]}"; then
  note "moe: $("$PYTHON" -c "import json,sys; r=json.load(open(sys.argv[1])); print('; '.join(x['shape'] + ' ' + ', '.join(f\"{p} {v.get('ms_per_layer', 'failed')} ms\" for p, v in x['paths'].items()) for x in r['rows']))" "$RESULTS/moe-$slug.json")"
else
  note "moe: FAILED"; failed=1
fi

# 3. multi-rank NCCL benchmarks need one GPU per rank
if [ "$ngpu" -ge 2 ]; then
  worlds=$(seq -s ' ' 2 2 "$ngpu" | awk '{print $1, $NF}' | tr ' ' '\n' | sort -un | tr '\n' ' ')
  if bench allreduce "$RESULTS/allreduce-$slug.json" --sizes-mb 16 256 --world-sizes $worlds --repeats 5; then
    note "allreduce (NCCL): $("$PYTHON" -c "
import json, sys
r = json.load(open(sys.argv[1]))
rows = [x for x in r['rows'] if x['size_mb'] >= 256]
print('; '.join(f\"n={x['world_size']} 256MB ring/NCCL busbw {x['ring_over_builtin_busbw']} (target >= 0.7)\" for x in rows))" "$RESULTS/allreduce-$slug.json")"
  else
    note "allreduce (NCCL): FAILED"; failed=1
  fi
  stages=$( [ "$ngpu" -ge 4 ] && echo 2,4 || echo 2 )   # one GPU per pipeline stage
  if bench pipeline "$RESULTS/pipeline-$slug.json" --stages "$stages"; then note "pipeline: done"; else note "pipeline: FAILED"; failed=1; fi
  if bench zero "$RESULTS/zero-$slug.json" --nproc "$stages"; then note "zero: done"; else note "zero: FAILED"; failed=1; fi
  # interleaved 1F1B on NCCL: point-to-point matched in order, no tags (the schedule guarantees it)
  if bench pipeline "$RESULTS/pipeline-interleaved-$slug.json" --schedule interleaved --stages "$stages"; then
    note "pipeline (interleaved): done"; else note "pipeline (interleaved): FAILED"; failed=1; fi
else
  note "multi-rank NCCL benchmarks (allreduce at 256 MB, pipeline incl. interleaved, zero): skipped, they need >= 2 GPUs and this machine has $ngpu"
fi

echo
echo "==================== gpu_check summary ($device) ===================="
for line in "${summary[@]}"; do echo "  $line"; done
exit $failed
