"""A/B benchmarks for tfp-picklefix (see benchmarks/README.md)."""
