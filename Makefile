# gemmkit build. `make` builds the libraries; `make test` and `make bench` first install
# what is missing (scripts/install-deps.sh), then build and run.
#
#   make [ARCH=x86_64|arm64] [CROSS=aarch64-linux-gnu-] [SANITIZE=address,undefined]
#   make test | bench | check-networks | install PREFIX=/usr/local | clean

HOST_ARCH := $(shell uname -m | sed -e 's/aarch64/arm64/')
ARCH ?= $(HOST_ARCH)
ifneq ($(filter-out x86_64 arm64,$(ARCH)),)
$(error ARCH must be x86_64 or arm64, not $(ARCH))
endif

# Cross builds get their own folder, sanitizer builds too: objects never mix.
ifeq ($(ARCH),$(HOST_ARCH))
CROSS ?=
BUILD ?= build$(if $(SANITIZE),-san)
else
CROSS ?= aarch64-linux-gnu-
BUILD ?= build-$(ARCH)$(if $(SANITIZE),-san)
endif

CXX := $(CROSS)g++
CC := $(CROSS)gcc
AR := $(CROSS)ar
PREFIX ?= /usr/local
VERSION := 0.1.0
SONAME := libgemmkit.so.0

# The arm64 cpuinfo comes from Debian's arm64 packages unpacked here (scripts/arm64-sysroot.sh).
ARM64_SYSROOT ?= $(CURDIR)/.deps/arm64-sysroot
ifneq ($(ARCH),$(HOST_ARCH))
DEP_CPPFLAGS := -I$(ARM64_SYSROOT)/usr/include
DEP_LDFLAGS := -L$(ARM64_SYSROOT)/usr/lib/aarch64-linux-gnu -Wl,-rpath-link,$(ARM64_SYSROOT)/usr/lib/aarch64-linux-gnu
endif

SANFLAGS := $(if $(SANITIZE),-fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all)
CPPFLAGS := -Iinclude -Isrc $(DEP_CPPFLAGS)
CXXFLAGS ?= -O2 -g
CXXFLAGS += -std=c++17 -fPIC -fopenmp -fvisibility=hidden -Wall -Wextra $(SANFLAGS)
ifeq ($(ARCH),x86_64)
# GCC's generic tuning splits unaligned 32-byte stores in the AVX2 helpers (packing,
# transforms, epilogue) into two 16-byte halves; every AVX2 CPU stores them whole faster.
CXXFLAGS += -mno-avx256-split-unaligned-store
endif
# GCC notes that 32-byte vectors passed by value changed ABI in GCC 4.6: ours only cross
# always-inline calls (never a function pointer or a library boundary), so it cannot matter.
CXXFLAGS += -Wno-psabi
ASFLAGS := -fPIC $(SANFLAGS)
LDLIBS := -lcpuinfo -fopenmp -lpthread
LDFLAGS += $(DEP_LDFLAGS) $(SANFLAGS)

LIB_SRC := $(wildcard src/common/*.cpp src/gemm/*.cpp src/conv/*.cpp src/ops/*.cpp src/arch/generic/*.cpp) \
           $(wildcard src/arch/$(ARCH)/*.cpp)
LIB_ASM := $(wildcard src/arch/$(ARCH)/*.S)
LIB_OBJ := $(patsubst %.cpp,$(BUILD)/obj/%.o,$(LIB_SRC)) $(patsubst %.S,$(BUILD)/obj/%.o,$(LIB_ASM))
SHARED := $(BUILD)/lib/libgemmkit.so
STATIC := $(BUILD)/lib/libgemmkit.a

# The network runner: a client of the public API (net/), the gk-infer program around it.
NET_SRC := $(filter-out net/gk_infer.cpp,$(wildcard net/*.cpp))
NET_OBJ := $(patsubst %.cpp,$(BUILD)/obj/%.o,$(NET_SRC))
INFER := $(BUILD)/bin/gk-infer

TEST_SRC := $(wildcard test/*.cpp)
TEST_OBJ := $(patsubst %.cpp,$(BUILD)/obj/%.o,$(TEST_SRC))
TEST_BIN := $(BUILD)/test/gemmkit_tests
# Programs the tests run against the shared library (interposition, cblas.h drop-in).
TEST_HELPERS := $(BUILD)/test/shared_xerbla_override $(BUILD)/test/shared_cblas_dropin \
                $(BUILD)/test/shared_reliability_child $(BUILD)/test/shared_conv_reliability_child
GTEST_DIR ?= /usr/src/googletest/googletest
GTEST_OBJ := $(BUILD)/obj/gtest/gtest-all.o

.PHONY: all test check-test bench check-networks install clean deps-test deps-bench
all: $(SHARED) $(STATIC) $(INFER)

$(BUILD)/obj/%.o: %.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) -MMD -MP -c $< -o $@

# The Winograd transforms are sums of products with constant coefficients: contracting
# them into FMAs halves their instruction count (and rounds once instead of twice).
$(BUILD)/obj/src/conv/algo_winograd.o: CXXFLAGS += -ffp-contract=fast

$(BUILD)/obj/net/%.o: CPPFLAGS += -I.
$(INFER): $(BUILD)/obj/net/gk_infer.o $(NET_OBJ) $(STATIC)
	@mkdir -p $(dir $@)
	$(CXX) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/obj/%.o: %.S
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(ASFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/lib/libgemmkit.so.$(VERSION): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CXX) -shared -Wl,-soname,$(SONAME) -Wl,--no-undefined $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(SHARED): $(BUILD)/lib/libgemmkit.so.$(VERSION)
	ln -sf libgemmkit.so.$(VERSION) $(BUILD)/lib/$(SONAME)
	ln -sf $(SONAME) $@

$(STATIC): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@
	$(AR) rcs $@ $^

# ---------------------------------------------------------------- tests

$(GTEST_OBJ): $(GTEST_DIR)/src/gtest-all.cc
	@mkdir -p $(dir $@)
	$(CXX) -std=c++17 -O1 -I$(GTEST_DIR)/include -I$(GTEST_DIR) $(SANFLAGS) -c $< -o $@

$(BUILD)/obj/test/%.o: CPPFLAGS += -I$(GTEST_DIR)/include -I.
$(TEST_BIN): $(TEST_OBJ) $(GTEST_OBJ) $(NET_OBJ) $(STATIC)
	@mkdir -p $(dir $@)
	$(CXX) $(LDFLAGS) -o $@ $(TEST_OBJ) $(GTEST_OBJ) $(NET_OBJ) $(STATIC) $(LDLIBS)

$(BUILD)/test/shared_%: test/programs/%.c $(SHARED)
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O1 -Iinclude $(DEP_CPPFLAGS) $(SANFLAGS) $(DEP_LDFLAGS) -o $@ $< \
	  -L$(BUILD)/lib -Wl,-rpath,'$$ORIGIN/../lib' -lgemmkit

# C++ helpers start OpenMP teams themselves (test/programs/reliability_child.cpp).
$(BUILD)/test/shared_%: test/programs/%.cpp $(wildcard test/programs/*.h) $(SHARED)
	@mkdir -p $(dir $@)
	$(CXX) -std=c++17 -O2 -fopenmp -Iinclude $(DEP_CPPFLAGS) $(SANFLAGS) $(DEP_LDFLAGS) -o $@ $< \
	  -L$(BUILD)/lib -Wl,-rpath,'$$ORIGIN/../lib' -lgemmkit -lpthread

# Emulated arm64 runs: qemu with both CPU models (plain NEON, and everything qemu has).
# GEMMKIT_TEST_QUICK: emulated NEON runs ~0.25 GFLOP/s, so the suite scales its sizes down.
QEMU := qemu-aarch64 -L /usr/aarch64-linux-gnu -E LD_LIBRARY_PATH=$(ARM64_SYSROOT)/usr/lib/aarch64-linux-gnu -E GEMMKIT_TEST_QUICK=1
ifeq ($(ARCH),$(HOST_ARCH))
TEST_RUNS := "$(TEST_BIN)"
else
TEST_RUNS := "$(QEMU) -cpu cortex-a72 $(TEST_BIN)" "$(QEMU) -cpu max $(TEST_BIN)"
endif

test: deps-test
	@$(MAKE) --no-print-directory check-test

check-test: $(TEST_BIN) $(TEST_HELPERS) $(INFER)
	@GEMMKIT_TEST_HELPERS=$(BUILD)/test GEMMKIT_TEST_RUNNER="$(if $(filter-out $(HOST_ARCH),$(ARCH)),$(QEMU))" \
	  scripts/run-tests.sh $(TEST_RUNS)

deps-test:
	@scripts/install-deps.sh test $(ARCH)

# ---------------------------------------------------------------- benchmarks

BENCH_BIN := $(BUILD)/perf/bench_gemm
BENCH_CONV_BIN := $(BUILD)/perf/bench_conv
# Network operations against memcpy (not in `make bench` yet).
BENCH_OPS_BIN := $(BUILD)/perf/bench_ops
$(BUILD)/obj/perf/%.o: CXXFLAGS += -O3
$(BENCH_BIN): $(BUILD)/obj/perf/bench_gemm.o $(BUILD)/obj/perf/peak.o $(BUILD)/obj/perf/sweep.o $(STATIC)
	@mkdir -p $(dir $@)
	$(CXX) $(LDFLAGS) -o $@ $^ -lbenchmark $(LDLIBS) -ldl
$(BENCH_CONV_BIN): $(BUILD)/obj/perf/bench_conv.o $(STATIC)
	@mkdir -p $(dir $@)
	$(CXX) $(LDFLAGS) -o $@ $^ -lbenchmark -ldnnl $(LDLIBS) -ldl
$(BENCH_OPS_BIN): $(BUILD)/obj/perf/bench_ops.o $(STATIC)
	@mkdir -p $(dir $@)
	$(CXX) $(LDFLAGS) -o $@ $^ -lbenchmark $(LDLIBS) -ldl

bench: deps-bench
	@$(MAKE) --no-print-directory $(BENCH_BIN) $(BENCH_CONV_BIN) $(BENCH_OPS_BIN) $(INFER)
	@scripts/bench.sh $(BENCH_BIN) $(BENCH_CONV_BIN) $(BENCH_OPS_BIN) $(INFER) $(BUILD)/bench

# The five networks end to end against PyTorch on the same weights (make bench runs it too).
check-networks: deps-bench
	@$(MAKE) --no-print-directory $(INFER)
	@scripts/networks.py check $(INFER) $(BUILD)/networks

deps-bench:
	@scripts/install-deps.sh bench $(ARCH)

# ---------------------------------------------------------------- install

CMAKE_PKG_DIR := lib/cmake/gemmkit
install: all
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig \
	  $(DESTDIR)$(PREFIX)/$(CMAKE_PKG_DIR)
	install -m 644 $(STATIC) $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(BUILD)/lib/libgemmkit.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/
	ln -sf libgemmkit.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(PREFIX)/lib/libgemmkit.so
	install -m 644 include/gemmkit.h include/gemmkit_cblas.h $(DESTDIR)$(PREFIX)/include/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' scripts/gemmkit.pc.in \
	  > $(DESTDIR)$(PREFIX)/lib/pkgconfig/gemmkit.pc
	for f in gemmkitConfig gemmkitConfigVersion; do \
	  sed -e 's|@VERSION@|$(VERSION)|' -e 's|@SONAME@|$(SONAME)|' scripts/$$f.cmake.in \
	    > $(DESTDIR)$(PREFIX)/$(CMAKE_PKG_DIR)/$$f.cmake || exit 1; \
	done

# make test installs into a staging folder (DESTDIR, and a PREFIX no search finds by itself),
# where test/test_cmake_package.cpp points a CMake project, test/cmake_consumer, with
# find_package(gemmkit). Host builds only: the consumer is built and run on this machine.
# The stage waits for everything `install: all` names, so the inner make only installs.
INSTALL_STAGE := $(BUILD)/test/install-stage
$(INSTALL_STAGE)/.complete: $(SHARED) $(STATIC) $(INFER) scripts/gemmkit.pc.in scripts/gemmkitConfig.cmake.in \
                            scripts/gemmkitConfigVersion.cmake.in
	rm -rf $(INSTALL_STAGE) && mkdir -p $(INSTALL_STAGE)
	@$(MAKE) --no-print-directory install DESTDIR=$(abspath $(INSTALL_STAGE)) PREFIX=/opt/gemmkit \
	  > $(INSTALL_STAGE)/install.log
	touch $@
# The consumer is compiled with the library's sanitizer flags, as test/programs are.
$(BUILD)/obj/test/test_cmake_package.o: CPPFLAGS += -DGK_TEST_SANFLAGS='"$(SANFLAGS)"'
ifeq ($(ARCH),$(HOST_ARCH))
check-test: $(INSTALL_STAGE)/.complete
endif

# ---------------------------------------------------------------- arm64 cross build

# A cross build first gets what it needs, as `make test ARCH=arm64` does: the cross
# compiler, then Debian's arm64 libcpuinfo unpacked into ARM64_SYSROOT. Not run as root,
# scripts/install-deps.sh stops at missing packages and prints the apt-get line to run.
ifneq ($(ARCH),$(HOST_ARCH))
$(ARM64_SYSROOT)/.complete:
	@ARM64_SYSROOT=$(ARM64_SYSROOT) scripts/install-deps.sh build $(ARCH)
$(LIB_OBJ) $(NET_OBJ) $(BUILD)/obj/net/gk_infer.o $(TEST_OBJ) $(GTEST_OBJ) $(TEST_HELPERS): | $(ARM64_SYSROOT)/.complete
endif

clean:
	rm -rf build build-* 

-include $(LIB_OBJ:.o=.d) $(TEST_OBJ:.o=.d) $(NET_OBJ:.o=.d) $(BUILD)/obj/net/gk_infer.d $(wildcard $(BUILD)/obj/perf/*.d)
