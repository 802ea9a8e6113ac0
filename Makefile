# Airlock. GNU make; see README.md.
#
#   make              build the library, the binaries (bin/) and the tests
#   make check        the inner loop: unit tests, plain and ASan+UBSan at once,
#                     and the layering; no cluster
#   make test         every test tier; ends with "N passed, N failed, N skipped"
#   make unit | integration | memory     one tier
#   make asan         ASan+UBSan build of everything, unit and integration tests
#   make valgrind     unit and integration tests under valgrind
#   make e2e          end-to-end tests on the real gVisor node (NODE=1)
#   make e2e-asan     the same with every binary built with ASan+UBSan
#   make chart        the Helm chart: render tests, then install/upgrade/test/uninstall
#   make chart-crds   copy crds/ into the chart
#   make cluster-up [NODE=1 | NODES=2] | cluster-down   the real cluster in .cluster/

ifeq ($(origin CC),default)
CC	 = gcc
endif
PKGS	 = libcurl jansson yaml-0.1 libmicrohttpd libcrypto
WARN	 = -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes \
	   -Wmissing-prototypes -Wpointer-arith -Wformat=2 \
	   -Wno-format-zero-length
OPT	?= -O2 -g
SAN	?=
CFLAGS	 = -std=c17 $(OPT) $(WARN) $(SAN) -pthread
LDFLAGS	 = $(SAN) -pthread

# The -dev packages, asked once and only when something is compiled (so
# that `make test` can install them first); a missing one stops the build
# with pkg-config's own message instead of a flood of missing headers.
pkg = $(shell pkg-config $(1) $(2) 2>&1 || echo '<PKGFAIL>')
pkgcheck = $(if $(findstring <PKGFAIL>,$(1)),$(error pkg-config $(2): \
	$(subst <PKGFAIL>,,$(1)) -- run `make deps` (tests/deps.sh) as root),$(1))
PKG_CFLAGS = $(eval PKG_CFLAGS := $$(call pkgcheck,$$(call pkg,--cflags,$(PKGS)),$(PKGS)))$(PKG_CFLAGS)
LDLIBS	 = $(eval LDLIBS := $$(call pkgcheck,$$(call pkg,--libs,$(PKGS)),$(PKGS)) -lm)$(LDLIBS)
TESTLIBS = $(eval TESTLIBS := $$(call pkgcheck,$$(call pkg,--libs,cmocka),cmocka))$(TESTLIBS)

# The layering, which the include paths enforce: a folder sees only the
# headers of the layers below it and its own, so an include that points
# up or sideways does not compile.
#
#   operator/    Kubernetes client, informers, queues: knows no CodeExecution
#   execution/   what a CodeExecution is (cx.h), its pod, config, log, result
#   controller/ node-agent/ cli/ proxy/   one program each, on the two above
#
# tests/support is on the path of the tests alone; tests and benchmarks
# may reach every layer.
INC_operator	= -Ioperator
INC_execution	= $(INC_operator) -Iexecution
INC_controller	= $(INC_execution) -Icontroller
INC_node-agent	= $(INC_execution) -Inode-agent
INC_cli		= $(INC_execution) -Icli
INC_proxy	= $(INC_execution) -Iproxy
INC_tests	= $(INC_execution) -Icontroller -Inode-agent -Icli -Iproxy -Itests/support
INC_bench	= $(INC_execution) -Icontroller -Inode-agent -Icli -Iproxy
CPPFLAGS = -D_GNU_SOURCE $(INC_$(firstword $(subst /, ,$(<)))) $(PKG_CFLAGS)

# Object trees are per flavour so a sanitizer build never mixes with a plain one.
B	?= build/plain

# One library a layer, one a program (its main.c apart, so tests link it).
OP_LIB	 = $(B)/liboperator.a
EX_LIB	 = $(B)/libexecution.a
CTL_LIB	 = $(B)/libcontroller.a
AG_LIB	 = $(B)/libnode-agent.a
CLI_LIB	 = $(B)/libcli.a
PX_LIB	 = $(B)/libproxy.a
lib_obj	 = $(patsubst %.c,$(B)/%.o,$(filter-out $(1)/main.c,$(wildcard $(1)/*.c)))
OP_OBJ	 = $(call lib_obj,operator)
EX_OBJ	 = $(call lib_obj,execution)
CTL_OBJ	 = $(call lib_obj,controller)
AG_OBJ	 = $(call lib_obj,node-agent)
CLI_OBJ	 = $(call lib_obj,cli) $(B)/gen/values.o
PX_OBJ	 = $(call lib_obj,proxy)
# What a test links: every program's library, then the layers (a static
# library is searched once, so each comes after what uses it).
ALL_LIBS = $(CTL_LIB) $(AG_LIB) $(CLI_LIB) $(PX_LIB) $(EX_LIB) $(OP_LIB)

SUP_SRC	 = $(wildcard tests/support/*.c)
SUP_OBJ	 = $(SUP_SRC:%.c=$(B)/%.o)

# The longest first (make check, 2026-11-27: test_session_bin 14 s of a
# 20 s tier, started last in name order it ended the tier 7 s late):
# the others fit beside them.
UNIT_FIRST = tests/unit/test_session_bin.c tests/unit/test_watch.c \
	     tests/unit/test_lease.c tests/unit/test_daemon.c
UNIT_SRC  = $(UNIT_FIRST) $(filter-out $(UNIT_FIRST),$(wildcard tests/unit/test_*.c))
UNIT_BIN  = $(UNIT_SRC:tests/unit/%.c=$(B)/tests/unit/%)
INTEG_SRC = $(wildcard tests/integration/test_*.c)
INTEG_BIN = $(INTEG_SRC:tests/integration/%.c=$(B)/tests/integration/%)
E2E_SRC   = $(wildcard tests/e2e/test_*.c)
E2E_BIN   = $(E2E_SRC:tests/e2e/%.c=$(B)/tests/e2e/%)
# test_nodes_e2e first: it starts its own controller, which a chart release
# left behind by test_nodes_chart would compete with.
NODES_SRC = tests/nodes/test_nodes_e2e.c tests/nodes/test_nodes_chart.c
NODES_BIN = $(NODES_SRC:tests/nodes/%.c=$(B)/tests/nodes/%)
# Helper programs the integration tests start (not tests themselves).
TOOL_SRC  = $(wildcard tests/integration/tool_*.c)
TOOL_BIN  = $(TOOL_SRC:tests/integration/%.c=$(B)/tests/integration/%)
CHART_SRC = $(wildcard tests/chart/test_*.c)
CHART_BIN = $(CHART_SRC:tests/chart/%.c=$(B)/tests/chart/%)
# Helper programs of the benchmarks.
BENCH_SRC = $(wildcard bench/*.c)
BENCH_BIN = $(BENCH_SRC:bench/%.c=$(B)/bench/%)

# Binaries: bin/ for the plain flavour, the flavour's own bin/ otherwise.
BIN_DIR	?= bin
BINS	 = $(BIN_DIR)/airlock-controller $(BIN_DIR)/airlock-node-agent $(BIN_DIR)/airlock \
	   $(BIN_DIR)/airlock-egress $(BIN_DIR)/airlock-egress-log

# Objects are never removed as intermediates: an incremental make check
# (the ASan flavour's test objects were) rebuilds only what changed.
.SECONDARY:

.PHONY: check check-plain check-asan unit-deps all test deps unit integration e2e e2e-asan nodes soak chart sdk chart-crds local-images memory asan \
	run-asan valgrind cluster-up cluster-down clean
.SUFFIXES:
.DELETE_ON_ERROR:

all: $(BINS) $(UNIT_BIN) $(INTEG_BIN) $(TOOL_BIN) $(E2E_BIN) $(NODES_BIN) $(CHART_BIN) $(BENCH_BIN)

$(B)/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c -o $@ $<

# The chart's values as a C string: its config.profiles are the runtimes
# the CLI's local mode knows (cli/local.c), as images/build.sh and
# images/local.sh read them.
$(B)/gen/values.c: charts/airlock/values.yaml
	@mkdir -p $(@D)
	{ echo '/* Generated by the Makefile from $<. */'; \
	  echo 'extern const char airlock_chart_values[];'; \
	  echo 'const char airlock_chart_values[] ='; \
	  sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$$/\\n"/' $<; \
	  echo ';'; } >$@

$(B)/gen/values.o: $(B)/gen/values.c
	$(CC) $(CFLAGS) -c -o $@ $<

$(OP_LIB): $(OP_OBJ)
$(EX_LIB): $(EX_OBJ)
$(CTL_LIB): $(CTL_OBJ)
$(AG_LIB): $(AG_OBJ)
$(CLI_LIB): $(CLI_OBJ)
$(PX_LIB): $(PX_OBJ)
$(ALL_LIBS):
	@rm -f $@
	ar rcs $@ $^

$(BIN_DIR)/airlock-controller: $(B)/controller/main.o $(CTL_LIB) $(EX_LIB) $(OP_LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BIN_DIR)/airlock-node-agent: $(B)/node-agent/main.o $(AG_LIB) $(EX_LIB) $(OP_LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BIN_DIR)/airlock: $(B)/cli/main.o $(CLI_LIB) $(EX_LIB) $(OP_LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# The egress proxy's two programs, one binary: the mode is argv[0]'s name
# (Squid's logfile_daemon gives no arguments of ours) or the first one.
$(BIN_DIR)/airlock-egress: $(B)/proxy/main.o $(PX_LIB) $(EX_LIB) $(OP_LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BIN_DIR)/airlock-egress-log: $(BIN_DIR)/airlock-egress
	ln -sf airlock-egress $@

$(B)/tests/unit/%: $(B)/tests/unit/%.o $(SUP_OBJ) $(ALL_LIBS)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(TESTLIBS)

$(B)/tests/integration/%: $(B)/tests/integration/%.o $(SUP_OBJ) $(ALL_LIBS)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(TESTLIBS)

$(B)/tests/e2e/%: $(B)/tests/e2e/%.o $(SUP_OBJ) $(ALL_LIBS)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(TESTLIBS)

$(B)/tests/nodes/%: $(B)/tests/nodes/%.o $(SUP_OBJ) $(ALL_LIBS)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(TESTLIBS)

$(B)/tests/chart/%: $(B)/tests/chart/%.o $(SUP_OBJ) $(ALL_LIBS)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(TESTLIBS)

$(B)/bench/%: $(B)/bench/%.o $(ALL_LIBS)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# /airlock/bin/warm, built for the host too (this flavour's flags), so that
# test_warm_bin, test_session_bin and test_zygote_bin (with images/runner/
# kernel.py and zygote.py) run what the runner images carry on
# tenant-shaped input.
$(B)/images/warm: images/runner/warm.c
	@mkdir -p $(@D)
	$(CC) -D_GNU_SOURCE -DWARM_TEST -DOUT_DIR='"/tmp/airlock-test-out"' \
		-DOUT_REAL='"/tmp/airlock-test-out"' \
		-DGATE_BIN='"$(CURDIR)/$(B)/images/gate"' $(CFLAGS) $(LDFLAGS) -o $@ $<

$(B)/tests/unit/test_warm_bin: | $(B)/images/warm $(B)/images/gate
$(B)/tests/unit/test_session_bin: | $(B)/images/warm
$(B)/tests/unit/test_zygote_bin: | $(B)/images/warm

# /airlock/bin/gate and the egress-gate image's binary, for the host too,
# so that test_gate_bin runs both of its modes on loopback.
$(B)/images/gate: images/runner/gate.c
	@mkdir -p $(@D)
	$(CC) -D_GNU_SOURCE $(CFLAGS) $(LDFLAGS) -o $@ $<

$(B)/tests/unit/test_gate_bin: | $(B)/images/gate

# This flavour's dependency files only.
-include $(shell find $(B) -name '*.d' 2>/dev/null)

# make test: install what is missing (as root), then every tier, then stop
# the test cluster. Unit, integration and memory run on a cluster without a
# node (the integration tests play the scheduler and kubelet themselves);
# e2e then brings up the real gVisor node in its place. The summary line
# comes from tests/run.sh, which tallies every tier's results in
# build/results and exits non-zero if anything failed (a tier that could
# not even start counts as a failure there).
#
# The unit tests run once plain and once under ASan+UBSan, as make check
# runs them (its tally in build/results here), and first: a broken unit
# test stops make test in a minute. The integration tests then run once,
# under ASan+UBSan (make memory): the plain run of the same binaries took
# 147 s and checked the same assertions the ASan run checks, which adds
# the sanitizers; `make integration` still runs them plain, and e2e,
# chart, sdk and nodes run the plain -O2 build. Valgrind runs the
# unit tests and the integration tests whose subject runs in their own
# process; not test_controller_it, whose
# subject is the controller it starts (ASan+UBSan in asan): under valgrind
# that was 94 s of the test's own client code (CI, 2026-11-27).
test: deps
	@rm -rf build/results
	$(MAKE) all
	$(MAKE) check CHECK_RESULTS=$(CURDIR)/build/results
	-$(MAKE) memory
	@tests/cluster/down.sh
	-$(MAKE) e2e
	-$(MAKE) e2e-asan
	-$(MAKE) chart
	-$(MAKE) sdk
	@tests/cluster/down.sh
	-$(MAKE) nodes
	@tests/cluster/down.sh
	@tests/run.sh summary check check-asan asan valgrind e2e e2e-asan chart sdk nodes

deps:
	@tests/deps.sh

unit: all
	@tests/run.sh unit $(B) $(UNIT_BIN)

# The inner loop (issue 29): only what the unit tests need (the daemons
# some of them start, and the tests), plain and ASan+UBSan built side by
# side, then both run at once, four binaries each at a time (most wait
# on timers), and the layering checked. No cluster.
unit-deps: $(BINS) $(UNIT_BIN)
check-plain:
	@$(MAKE) --no-print-directory unit-deps
check-asan:
	@$(ASAN_MAKE) --no-print-directory unit-deps
CHECK_RESULTS ?= $(CURDIR)/build/results-check
check:
	@$(MAKE) --no-print-directory -j2 check-plain check-asan
	@tests/layering.sh $(B) build/asan
	@python3 tests/figures.py
	@rm -rf $(CURDIR)/build/results-check
	@export AIRLOCK_RESULTS=$(CHECK_RESULTS) JOBS=4; \
	  tests/run.sh check $(B) $(UNIT_BIN) > build/check.log 2>&1 & \
	  tests/run.sh check-asan build/asan $(UNIT_SRC:tests/unit/%.c=build/asan/tests/unit/%) \
	    > build/check-asan.log 2>&1; wait; \
	  tail -qn 1 build/check.log build/check-asan.log; \
	  AIRLOCK_RESULTS=$(CHECK_RESULTS) tests/run.sh summary check check-asan

integration: all
	@tests/cluster/up.sh
	@tests/run.sh integration $(B) $(INTEG_BIN)

# The ASan+UBSan flavour: its own object tree, every test in it.
ASAN_MAKE  = $(MAKE) B=build/asan BIN_DIR=build/asan/bin OPT="-O1 -g" \
	     SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all"
ASAN_TESTS = $(UNIT_SRC:tests/unit/%.c=build/asan/tests/unit/%) \
	     $(INTEG_SRC:tests/integration/%.c=build/asan/tests/integration/%)

run-asan:
	$(ASAN_MAKE) all
	@tests/cluster/up.sh
	@tests/run.sh asan build/asan $(ASAN_TESTS)

# make memory (in make test, after make check): the integration tests
# under ASan+UBSan, their daemons too, and beside them the unit tests under
# valgrind (100 s saved on two cores: clean-clone runs ci5 and ci9,
# 2026-11-27); then the in-process integration tests under valgrind. The
# unit tests' timing bounds are the promises of what they test and hold
# on a starved core (test_lease: a safety check at every poll, liveness
# with seconds of room); ci8 failed on the old real-time upper bounds.
VALGRIND_INTEG = $(filter-out %/test_controller_it,$(INTEG_BIN))
ASAN_INTEG = $(INTEG_SRC:tests/integration/%.c=build/asan/tests/integration/%)
memory:
	-$(ASAN_MAKE) all
	@tests/cluster/up.sh || tests/cluster/up.sh
	-@VALGRIND=1 tests/run.sh valgrind $(B) $(UNIT_BIN) > build/valgrind-unit.log 2>&1 & \
	  tests/run.sh asan build/asan $(ASAN_INTEG); \
	  wait; cat build/valgrind-unit.log
	@VALGRIND=1 tests/run.sh valgrind $(B) $(VALGRIND_INTEG)

asan:
	@rm -rf build/results
	-$(MAKE) run-asan
	@tests/run.sh summary asan

valgrind: all
	@rm -rf build/results
	@tests/cluster/up.sh
	-@VALGRIND=1 tests/run.sh valgrind $(B) $(UNIT_BIN) $(INTEG_BIN)
	@tests/run.sh summary valgrind

cluster-up:
	@NODE=$(NODE) NODES=$(NODES) tests/cluster/up.sh

# End to end, on the real node: gVisor, containerd, a kubelet.
e2e: all
	@tests/cluster/node-deps.sh
	@NODE=1 tests/cluster/up.sh || NODE=1 tests/cluster/up.sh
	@images/local.sh
	@tests/run.sh e2e $(B) $(E2E_BIN) tests/e2e/test_readme.py

# The end-to-end tests again, with the controller, the node agent and the
# CLI built with ASan+UBSan: a leak or an error fails the run (the daemons
# must exit 0 on SIGTERM).
ASAN_E2E = $(E2E_SRC:tests/e2e/%.c=build/asan/tests/e2e/%)
e2e-asan:
	$(ASAN_MAKE) all
	@tests/cluster/node-deps.sh
	@NODE=1 tests/cluster/up.sh
	@images/local.sh
	@tests/run.sh e2e-asan build/asan $(ASAN_E2E)

# The root filesystems `airlock run --local` uses (images/local.sh).
local-images:
	@tests/cluster/node-deps.sh
	@images/local.sh

# The Helm chart: lint and render tests, then install -> run -> upgrade ->
# test -> uninstall on the real node, with helm pinned and built from its
# Go module (tests/cluster/versions.sh); then the README's "Five minutes to
# a cluster" as a user types it (tests/chart/test_readme_cluster.py).
chart: all
	@tests/cluster/node-deps.sh
	@NODE=1 tests/cluster/up.sh
	@HELM=$$(tests/cluster/build.sh helm | sed -n 's/^HELM_BIN_DIR=//p')/helm \
		tests/run.sh chart $(B) $(CHART_BIN) tests/chart/test_readme_cluster.py

# The Python SDK (sdk/python): pip-installed into a cached venv of
# tests/sdk/requirements.txt, then pytest on the real node, with this
# clone's controller and agent (tests/sdk/test_sdk_tier).
sdk: all
	@tests/cluster/node-deps.sh
	@NODE=1 tests/cluster/up.sh
	@images/local.sh
	@tests/run.sh sdk $(B) tests/sdk/test_sdk_tier

# Two nodes, and faults: the API server, etcd, containerd restarted, a node
# lost and brought back (tests/nodes, tests/cluster/restart.sh).
# up.sh is tried twice: twice in this stop's runs a first NODES=2 start,
# right after a teardown, failed with the apiserver gone in its first 2 s
# (not understood yet; the second start worked each time); make memory's
# start too (once, 2026-11-27, with no node).
nodes: all
	@tests/cluster/node-deps.sh
	@NODES=2 tests/cluster/up.sh || NODES=2 tests/cluster/up.sh
	@HELM=$$(tests/cluster/build.sh helm | sed -n 's/^HELM_BIN_DIR=//p')/helm \
		tests/run.sh nodes $(B) $(NODES_BIN)

# The soak (bench/soak.sh): 200 executions of five kinds on the chart's
# install across two nodes, with every fault of restart.sh, an agent pod
# replaced and a helm upgrade during the load; a quarter of an hour, so not
# part of make test. Appends its report to bench/RESULTS.md. up.sh makes
# the daemons' images from bin/ (hence all first); tried twice as for nodes.
# First, in seconds and with no cluster, the report's account on hand-made
# executions and a dry run of the script with stand-ins for the cluster.
soak: all
	@python3 bench/test_soak_report.py
	@bench/test_soak_dry.sh
	@tests/cluster/node-deps.sh
	@NODES=2 tests/cluster/up.sh || NODES=2 tests/cluster/up.sh
	@HELM=$$(tests/cluster/build.sh helm | sed -n 's/^HELM_BIN_DIR=//p')/helm \
		bench/soak.sh $(SOAK_N)

# The chart's CRDs are crds/'s; test_render fails when they drift.
chart-crds:
	cp crds/airlock.dev_codeexecutions.yaml crds/airlock.dev_codeexecutionpools.yaml \
		crds/airlock.dev_codeexecutionartifacts.yaml crds/airlock.dev_codesessions.yaml \
		charts/airlock/crds/

cluster-down:
	@tests/cluster/down.sh

clean:
	rm -rf build bin
