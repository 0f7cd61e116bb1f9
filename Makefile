# tfp-picklefix: `make demo` runs the seed job on the default stack, `make test` the whole matrix.
PYTHON ?= python3
STACKS ?= all
STACK ?= modern

.PHONY: test demo setup bench bench-quick clean

test:
	$(PYTHON) scripts/matrix.py test --stacks $(STACKS)

demo:
	$(PYTHON) scripts/matrix.py demo --stack $(STACK)

setup:
	$(PYTHON) scripts/matrix.py setup --stacks $(STACKS)

clean:
	rm -rf .venvs .matrix build *.egg-info

# Benchmarks (A/B in fresh processes): results go to benchmarks/results/<machine-tag>/.
BENCH_PYTHON ?= .venvs/modern/bin/python
bench:
	$(PYTHON) scripts/matrix.py setup --stacks modern
	$(BENCH_PYTHON) -m pip install -q matplotlib
	$(BENCH_PYTHON) -m benchmarks

bench-quick:
	$(PYTHON) scripts/matrix.py setup --stacks modern
	$(BENCH_PYTHON) -m pip install -q matplotlib
	$(BENCH_PYTHON) -m benchmarks --quick
