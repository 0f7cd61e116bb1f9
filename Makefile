# tfp-picklefix: `make demo` runs the seed job on the default stack, `make test` the whole matrix.
PYTHON ?= python3
STACKS ?= all
STACK ?= modern

.PHONY: test demo setup bench bench-quick bench-legacy bench-compiled clean

test:
	$(PYTHON) scripts/matrix.py test --stacks $(STACKS)

demo:
	$(PYTHON) scripts/matrix.py demo --stack $(STACK)

setup:
	$(PYTHON) scripts/matrix.py setup --stacks $(STACKS)

clean:
	rm -rf .venvs .matrix build *.egg-info

# Benchmarks (A/B in fresh processes): results go to benchmarks/results/<machine-tag>/.
# `make bench`: the CPU suite (TF + NumPy substrates, end to end, threads, memory on the
# default stack; the JAX substrate on the jax-nightly stack). `make bench-legacy`: the
# legacy stacks (TF 2.5.3 + TFP 0.9/0.10/0.11), none vs package vs the A/A control, the
# full case list, 8 rounds (enough for the pooled ratio's interval), then every case with
# the package patched in and out in turn inside one process (3 processes, ~10 min a stack),
# and the cases that came out outside 0.98-1.02 there beside their A/A control, each
# measured again with the package in processes like the control's (~2 min).
BENCH_PYTHON ?= .venvs/modern/bin/python
LEGACY_STACKS ?= legacy-0.9 legacy-0.10 legacy-0.11
bench:
	$(PYTHON) scripts/matrix.py setup --stacks modern,jax-nightly
	$(BENCH_PYTHON) -m pip install -q matplotlib
	$(BENCH_PYTHON) -m benchmarks --substrates tf,numpy
	$(BENCH_PYTHON) -m benchmarks --python .venvs/jax-nightly/bin/python --substrates jax --stack jax-nightly

bench-quick:
	$(PYTHON) scripts/matrix.py setup --stacks modern
	$(BENCH_PYTHON) -m pip install -q matplotlib
	$(BENCH_PYTHON) -m benchmarks --quick

bench-legacy:
	$(PYTHON) scripts/matrix.py setup --stacks modern,$(shell echo $(LEGACY_STACKS) | tr ' ' ',')
	$(BENCH_PYTHON) -m pip install -q matplotlib
	for s in $(LEGACY_STACKS); do \
	  (. .venvs/$$s/env.sh && $(BENCH_PYTHON) -m benchmarks --python .venvs/$$s/bin/python \
	     --repeats 8 --stack $$s) || exit 1; \
	done

# The compiled cases alone (tf.function, XLA on the default stack; jax.jit on
# jax-nightly), 11 rounds of fresh processes: on a shared machine one process runs the
# same compiled call up to 2x slower than another, which 3 rounds cannot resolve. Then,
# inside one process, each case traced with each cache mode, and with the package patched
# in and out (the cases outside 0.98-1.02 there again beside their A/A control).
bench-compiled:
	$(PYTHON) scripts/matrix.py setup --stacks modern,jax-nightly
	$(BENCH_PYTHON) -m pip install -q matplotlib
	$(BENCH_PYTHON) -m benchmarks --compiled --substrates tf
	$(BENCH_PYTHON) -m benchmarks --compiled --python .venvs/jax-nightly/bin/python --substrates jax --stack jax-nightly
