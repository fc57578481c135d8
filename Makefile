# Thin wrapper around CMake. Every target installs missing Debian packages first,
# so the two README commands work on a fresh Debian 12 machine.
JOBS  ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE ?= cmake
CTEST ?= ctest
BUILD_TYPE ?= RelWithDebInfo

.PHONY: all deps build test test-flaky tangle demo ring tsan asan clang fuzz bench format clean

all: build

deps:
	@scripts/install-deps.sh

build/CMakeCache.txt: | deps
	$(CMAKE) -S . -B build -DCMAKE_BUILD_TYPE=$(BUILD_TYPE)

build: deps build/CMakeCache.txt
	$(CMAKE) --build build -j $(JOBS)

# Tests labelled "flaky" (open bugs, see docs/development.md) run in `make test-flaky`.
# test_report also needs Chromium and libpng (install-deps.sh report): configured again
# after they are in, so that its screenshot reader is built.
test: deps
	@scripts/install-deps.sh report
	$(CMAKE) -S . -B build -DCMAKE_BUILD_TYPE=$(BUILD_TYPE)
	$(CMAKE) --build build -j $(JOBS)
	cd build && $(CTEST) --output-on-failure -j $(JOBS) -LE flaky

test-flaky: build
	cd build && $(CTEST) --output-on-failure -L flaky

# The tangle check (tests/runtime/test_tangle.sh) on all of libaugur, as make test's
# test_tangle runs it.
tangle: build
	tests/runtime/test_tangle.sh --list build/tangle-all.txt

demo: build
	build/demos/augur-mf

ring: build
	build/demos/augur-ring

bench: build
	build/bench/augur-bench-sched
	build/bench/augur-bench-mf
	build/bench/augur-bench-net
	build/bench/augur-bench-lda
	build/bench/augur-bench-maps
	build/bench/augur-bench-queues
	build/bench/augur-bench-ids --runs 1

# Sanitizer builds live in their own trees so they never mix with the normal build.
tsan: deps
	$(CMAKE) -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAUGUR_SANITIZE=thread
	$(CMAKE) --build build-tsan -j $(JOBS)
	cd build-tsan && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
	  $(CTEST) --output-on-failure -j $(JOBS) -L 'unit|threads' 

asan: deps
	$(CMAKE) -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAUGUR_SANITIZE=address
	$(CMAKE) --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS="detect_leaks=1" UBSAN_OPTIONS="halt_on_error=1 print_stacktrace=1" \
	  $(CTEST) --output-on-failure -j $(JOBS) -LE 'install|flaky'

# clang with -Werror (CMake's default) on everything, then the unit tests: the code must
# build warning-free under both compilers, not only under gcc.
clang:
	@scripts/install-deps.sh clang
	$(CMAKE) -S . -B build-clang -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang
	$(CMAKE) --build build-clang -j $(JOBS)
	cd build-clang && $(CTEST) --output-on-failure -j $(JOBS) -L unit

# libFuzzer on the frame decoder and the handshake, then on the parameter-server message
# decoders (actors/psmsg.c), each from its committed seeds for FUZZ_SECONDS; the corpora
# they grow go to scratch folders, not into the repository.
FUZZ_SECONDS ?= 60
fuzz:
	@scripts/install-deps.sh fuzz
	$(CMAKE) -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
	  -DAUGUR_FUZZ=ON
	$(CMAKE) --build build-fuzz -j $(JOBS) --target fuzz_wire fuzz_psmsg
	rm -rf build-fuzz/corpus && mkdir -p build-fuzz/corpus && cp tests/fuzz/corpus/wire/* build-fuzz/corpus/
	build-fuzz/tests/fuzz/fuzz_wire -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	  build-fuzz/corpus tests/fuzz/corpus/wire
	rm -rf build-fuzz/corpus-ps && mkdir -p build-fuzz/corpus-ps && cp tests/fuzz/corpus/psmsg/* build-fuzz/corpus-ps/
	build-fuzz/tests/fuzz/fuzz_psmsg -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	  build-fuzz/corpus-ps tests/fuzz/corpus/psmsg

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf build build-tsan build-asan build-clang build-fuzz
