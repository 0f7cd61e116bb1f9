#!/usr/bin/env bash
# The GPU check in one call (benchmarks/README.md, "GPU"): the GPU benchmark (JAX
# substrate of tfp-nightly, sizes up to 1e8, every variant) and then the test suite's
# JAX-substrate tests, on the GPU. Results and logs go to $OUT (default
# benchmarks/results/gpu-run). Wheels in $WHEELS (default .whl/, e.g. tfp-nightly and
# its needs that the machine lacks) are installed into /tmp/tfp-site first.
#   OUT=... REPEATS=9 BENCH_SECONDS=330 TEST_SECONDS=120 [TESTS=tests/...] benchmarks/gpu.sh
# BENCH_FLAGS adds runner flags (a CPU dry run: BENCH_FLAGS="--allow-cpu --repeats 1");
# PYTEST_FLAGS adds pytest flags (-n 8: the tests in 8 processes); TEST_SECONDS=0 skips
# the tests (a second benchmark run in the same lease), BENCH_SECONDS=0 the benchmark
# (the tests alone).
set -u -o pipefail
OUT=${OUT:-benchmarks/results/gpu-run}
PY=${PYTHON:-python3}
WHEELS=${WHEELS:-.whl}
mkdir -p "$OUT"
if ls "$WHEELS"/*.whl >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/tfp-site "$WHEELS"/*.whl || exit 1
  export PYTHONPATH=/tmp/tfp-site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1 TF_CPP_MIN_LOG_LEVEL=3
# The cache's C path, in the checkout (the runner's workers and the tests import it from
# there): built if the machine has a compiler and Python's headers, else the pure-Python
# cache runs; device.txt and results.md say which.
"$PY" scripts/build_speedups.py 2>&1 | tee "$OUT/device.txt"
# JAX takes 75 % of the GPU's memory per process unless told not to: the tests in
# several processes (PYTEST_FLAGS="-n 8") could not start (the runner sets it itself).
export XLA_PYTHON_CLIENT_PREALLOCATE=${XLA_PYTHON_CLIENT_PREALLOCATE:-false}
nvidia-smi -L 2>&1 | tee -a "$OUT/device.txt"
"$PY" -c "import jax, numpy, tensorflow_probability.substrates.jax as t; print('jax', jax.__version__, jax.devices(), 'numpy', numpy.__version__, 'tfp', t.__version__)" 2>&1 \
  | tee -a "$OUT/device.txt" || exit 1
rc=0
if [ "${BENCH_SECONDS:-330}" != 0 ]; then  # (timeout 0 would mean no limit at all)
  timeout "${BENCH_SECONDS:-330}" "$PY" -m benchmarks --gpu --repeats "${REPEATS:-9}" \
    --out "$OUT/bench" ${BENCH_FLAGS:-} 2>&1 | tee "$OUT/bench.log" || rc=1
fi
[ "${TEST_SECONDS:-120}" = 0 ] && exit $rc
# The suite as the jax-nightly stack runs it, less what needs no GPU and takes minutes
# (the coverage table walks every TFP class; the thread stress runs 30 s per case).
PYTHONPATH=$PWD:${PYTHONPATH:-} TFP_PICKLEFIX_STACK=jax-nightly timeout "${TEST_SECONDS:-120}" \
  "$PY" -m pytest ${TESTS:-tests} -q -p no:cacheprovider -rfE ${PYTEST_FLAGS:-} \
  --deselect "tests/test_coverage.py::test_coverage_table[jax]" \
  --deselect tests/test_cache_defects.py --deselect tests/test_benchmarks.py \
  2>&1 | tee "$OUT/tests.log" || rc=1
exit $rc
