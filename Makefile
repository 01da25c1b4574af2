# Front door: `make` (release binaries in build/bin), `make test` (ASan+UBSan build + all tests),
# `make bench`, `make chaos`, `make demo`, `make fuzz`, `make fresh-check` (demo + test in a
# pristine root),
# `make clean`.
.DEFAULT_GOAL := all
SHELL := /bin/bash

BUILD ?= release
PKGS := libmicrohttpd libnghttp2 libprotobuf-c jansson libuv sqlite3 libcurl yaml-0.1 libarchive \
  libnftables libnftnl libmnl libzstd libcrypto

ifeq ($(BUILD),release)
  OUT := build
  CC ?= cc
  OPT := -O2 -D_FORTIFY_SOURCE=2
  SAN :=
else ifeq ($(BUILD),asan)
  OUT := build/asan
  OPT := -O1 -g -fno-omit-frame-pointer
  SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined
else ifeq ($(BUILD),fuzz)
  OUT := build/fuzz
  CC := clang
  OPT := -O1 -g -fno-omit-frame-pointer -DFUZZING
  SAN := -fsanitize=address,undefined,fuzzer-no-link
else
  $(error unknown BUILD=$(BUILD))
endif

GEN := build/gen
WARN := -Wall -Wextra -Werror -Wno-unused-parameter -Wshadow -Wstrict-prototypes -Wmissing-prototypes
CFLAGS_ALL := -std=gnu11 $(OPT) $(SAN) $(WARN) -g -fPIE -fstack-protector-strong \
  -fvisibility=hidden -D_GNU_SOURCE -Isrc -Iinclude -I$(GEN) \
  $(shell pkg-config --cflags $(PKGS) 2>/dev/null) $(CFLAGS)
LDFLAGS_ALL := $(SAN) -pie -Wl,-z,relro,-z,now -Wl,--as-needed $(LDFLAGS)
LIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lhttp_parser -lpthread -lm

# proto/*.proto are the wire contract (served as-is by reflection). protoc-c 1.4 does not know
# proto3 `optional`, which is wire-identical to a plain field here, so C code is generated from a
# copy with the keyword stripped.
PROTOS := $(wildcard proto/*.proto)
PROTO_C := $(patsubst proto/%.proto,$(GEN)/%.pb-c.c,$(PROTOS)) $(GEN)/google/protobuf/empty.pb-c.c
PROTO_H := $(PROTO_C:.c=.h)
DESC_C := $(GEN)/proto-descriptors.c

LIB_SRC := $(wildcard src/basic/*.c) $(wildcard src/shared/*.c)
SANDBOXD_SRC := $(filter-out src/sandboxd/sandboxd-main.c,$(wildcard src/sandboxd/*.c))
OBJ_DIR := $(OUT)/obj
obj = $(patsubst %.c,$(OBJ_DIR)/%.o,$(1))
LIB_OBJ := $(call obj,$(LIB_SRC)) $(call obj,$(PROTO_C) $(DESC_C))
SANDBOXD_OBJ := $(call obj,$(SANDBOXD_SRC))
# Control plane: object model (src/api) and the local backend (src/local), linked by asb, unit
# tests and fuzzers; the asb CLI is one file per verb in src/cli.
# src/reconcile is the backend-neutral reconcile core (pure functions over objects), shared by
# `asb serve` and asb-controller.
CP_OBJ := $(call obj,$(wildcard src/api/*.c) $(wildcard src/reconcile/*.c) $(wildcard src/local/*.c))
# Further components: every src/<dir>/<binary>-main.c is one binary in build/bin; the other files
# of the directory are its library objects.
nonmain = $(call obj,$(filter-out %-main.c,$(wildcard src/$(1)/*.c)))
ROUTER_OBJ := $(call nonmain,router)
AGENT_OBJ := $(call nonmain,agent)
TOOLBOX_OBJ := $(call nonmain,toolbox)
KUBE_OBJ := $(call nonmain,kube)
EXTRA_MAINS := $(wildcard src/router/*-main.c src/agent/*-main.c src/toolbox/*-main.c \
  src/kube/*-main.c)
EXTRA_BINS := $(foreach m,$(EXTRA_MAINS),$(OUT)/bin/$(patsubst %-main.c,%,$(notdir $(m))))
# The asb CLI is a client (libasb, src/basic, src/shared); the server side of `asb serve` is its
# own binary, asb-server, that `asb serve` execs (src/cli/asb-serve-exec.c), so the client does
# not load the control plane's libraries at every start. Both link the common objects from
# archives so that only the members they use (and those members' libraries) come in.
ASB_SERVER_SRC := src/cli/asb-serve.c src/cli/asb-server-main.c
ASB_OBJ := $(call obj,$(filter-out $(ASB_SERVER_SRC),$(wildcard src/cli/*.c)))
ASB_SERVER_OBJ := $(call obj,$(ASB_SERVER_SRC))
COMMON_A := $(OUT)/obj/libasb-common.a
LIBASB_A_STATIC := $(OUT)/obj/libasb-objs.a
API_A := $(OUT)/obj/libasb-api.a
# libasb, the client library (include/asb/*.h): position-independent objects linked into
# build/lib/libasb.so.0 (only ASB_PUBLIC symbols exported), libasb.a, the CLI and the tests.
LIBASB_OBJ := $(call obj,$(wildcard src/libasb/*.c))
LIBASB_PKGS := libcurl jansson yaml-0.1 libnghttp2 libprotobuf-c
# The sandbox client's protobuf-c code, compiled a second time position-independent for the
# library only (the executables link the copies in LIB_OBJ).
LIBASB_PB_OBJ := $(patsubst %.c,$(OUT)/obj-pic/%.o,$(GEN)/process.pb-c.c \
  $(GEN)/google/protobuf/empty.pb-c.c)
# The one error table (src/shared/status.c), the buffer (src/basic/buf.c) and the loader of
# libcurl (src/basic/dlopen-util.c) libasb shares with the rest of the tree, compiled a second
# time position-independent for the library.
LIBASB_PB_OBJ += $(patsubst %.c,$(OUT)/obj-pic/%.o,src/shared/status.c src/basic/buf.c \
  src/basic/dlopen-util.c)
LIBASB_SO := $(OUT)/lib/libasb.so.0
LIBASB_LIBS := $(OUT)/lib/libasb.a $(LIBASB_SO) $(OUT)/lib/libasb.so $(OUT)/lib/pkgconfig/libasb.pc

UNIT_SRC := $(wildcard tests/unit/test-*.c)
UNIT_BIN := $(patsubst tests/unit/%.c,$(OUT)/tests/%,$(UNIT_SRC))
FUZZ_SRC := $(wildcard fuzz/fuzz-*.c)
FUZZ_BIN := $(patsubst fuzz/%.c,build/fuzz/bin/%,$(FUZZ_SRC))

BINS := $(OUT)/bin/sandboxd $(OUT)/bin/asb $(OUT)/bin/asb-server $(EXTRA_BINS) \
  $(OUT)/bin/asb-gen-crds

.PHONY: all deps test unit fuzz fuzz-build bench chaos demo clean format images fresh-check
all: deps
	@$(MAKE) --no-print-directory BUILD=$(BUILD) binaries

binaries: $(BINS) $(UNIT_BIN) $(LIBASB_LIBS)

deps:
	@bash scripts/deps.sh

$(GEN)/c-src/%.proto: proto/%.proto
	@mkdir -p $(dir $@)
	sed -E 's/^(\s*)optional /\1/' $< > $@

$(GEN)/%.pb-c.c $(GEN)/%.pb-c.h: $(GEN)/c-src/%.proto
	protoc-c --proto_path=$(GEN)/c-src --proto_path=/usr/include --c_out=$(GEN) $<

$(GEN)/google/protobuf/empty.pb-c.c $(GEN)/google/protobuf/empty.pb-c.h:
	@mkdir -p $(GEN)
	protoc-c --proto_path=/usr/include --c_out=$(GEN) google/protobuf/empty.proto

# Serialized FileDescriptorSet of every proto we serve, for gRPC server reflection.
# grpc.reflection.v1alpha has the same messages as v1 (sandboxd serves both with the v1 C types);
# only its descriptor is needed, so it is derived from proto/reflection.proto.
$(GEN)/proto/reflection_v1alpha.proto: proto/reflection.proto
	@mkdir -p $(dir $@)
	sed -e 's/^package grpc.reflection.v1;/package grpc.reflection.v1alpha;/' $< > $@

$(GEN)/descriptors.pb: $(PROTOS) $(GEN)/proto/reflection_v1alpha.proto
	@mkdir -p $(GEN)
	protoc --proto_path=proto --proto_path=$(GEN)/proto --proto_path=/usr/include --include_imports \
	  -o $@ $(PROTOS) $(GEN)/proto/reflection_v1alpha.proto
$(DESC_C): $(GEN)/descriptors.pb scripts/embed.sh
	bash scripts/embed.sh $< asb_proto_descriptor_set > $@

.SECONDARY:

# Generated protobuf-c code is not ours to fix: compile it without -Werror.
$(OBJ_DIR)/$(GEN)/%.o: $(GEN)/%.c $(PROTO_H)
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	@$(CC) $(CFLAGS_ALL) -Wno-error -Wno-missing-braces -Wno-missing-prototypes -MMD -MP -c $< -o $@

$(OBJ_DIR)/%.o: %.c $(PROTO_H)
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	@$(CC) $(CFLAGS_ALL) -MMD -MP -c $< -o $@

# sandboxd is the first process of every sandbox, so its start is paid once per sandbox
# (docs/performance.md, "sandboxd start"): it takes the common objects from the archive (only the
# members it uses), so --as-needed leaves out the libraries only the rest of the tree uses. The
# libraries themselves stay shared, so a security update of one reaches every new sandbox.
$(OUT)/bin/sandboxd: $(call obj,src/sandboxd/sandboxd-main.c) $(SANDBOXD_OBJ) $(COMMON_A)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	@$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LIBS)

$(COMMON_A): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	@rm -f $@ && ar rcs $@ $^
$(LIBASB_A_STATIC): $(LIBASB_OBJ)
	@mkdir -p $(dir $@)
	@rm -f $@ && ar rcs $@ $^
$(API_A): $(call obj,$(wildcard src/api/*.c))
	@mkdir -p $(dir $@)
	@rm -f $@ && ar rcs $@ $^

# asb get prints a kind's columns from the kind tables of src/api.
$(OUT)/bin/asb: $(ASB_OBJ) $(LIBASB_A_STATIC) $(API_A) $(COMMON_A)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	@$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LIBS)

$(OUT)/bin/asb-server: $(ASB_SERVER_OBJ) $(ROUTER_OBJ) $(LIBASB_OBJ) $(CP_OBJ) $(LIB_OBJ)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	@$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LIBS)

# Build tool: the CRDs of deploy/crds from the kind tables of src/api (scripts/gen-crds.py).
$(OUT)/bin/asb-gen-crds: $(call obj,src/api/gen/asb-gen-crds-main.c $(wildcard src/api/*.c)) $(LIB_OBJ)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	@$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LIBS)

# geminicli-toolbox runs inside sandboxes: it links only its own objects and src/basic+shared.
$(OUT)/bin/geminicli-toolbox: $(call obj,src/toolbox/geminicli-toolbox-main.c) $(TOOLBOX_OBJ) $(LIB_OBJ)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	@$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LIBS)

$(OUT)/bin/sandbox-router: $(call obj,src/router/sandbox-router-main.c) $(ROUTER_OBJ) $(KUBE_OBJ) \
    $(LIBASB_OBJ) $(CP_OBJ) $(LIB_OBJ)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	@$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LIBS)

$(OUT)/bin/asb-controller: $(call obj,src/kube/asb-controller-main.c) $(KUBE_OBJ) $(LIBASB_OBJ) \
    $(CP_OBJ) $(LIB_OBJ)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	@$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LIBS)

# The agent binaries (sandboxed-tools, acp-server, acp-client).
$(OUT)/bin/%: $(OBJ_DIR)/src/agent/%-main.o $(AGENT_OBJ) $(LIBASB_OBJ) $(CP_OBJ) $(LIB_OBJ)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	@$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LIBS)

ALL_LIB_OBJ := $(SANDBOXD_OBJ) $(CP_OBJ) $(ROUTER_OBJ) $(AGENT_OBJ) $(TOOLBOX_OBJ) $(KUBE_OBJ) \
  $(LIBASB_OBJ) $(LIB_OBJ)
$(OUT)/tests/test-%: $(call obj,tests/unit/test-%.c) $(ALL_LIB_OBJ)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	@$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LIBS)

# The MCP fuzzer drives the protocol core of `asb mcp` (src/cli/asb-mcp*.c, without main).
MCP_OBJ := $(call obj,$(wildcard src/cli/asb-mcp*.c) src/cli/asb-cli.c)
build/fuzz/bin/fuzz-mcp-jsonrpc: $(call obj,fuzz/fuzz-mcp-jsonrpc.c) $(MCP_OBJ) $(ALL_LIB_OBJ)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	@$(CC) -fsanitize=address,undefined,fuzzer -o $@ $^ $(LIBS)

build/fuzz/bin/fuzz-%: $(call obj,fuzz/fuzz-%.c) $(ALL_LIB_OBJ)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	@$(CC) -fsanitize=address,undefined,fuzzer -o $@ $^ $(LIBS)

$(LIBASB_OBJ): CFLAGS_ALL += -fPIC

$(OUT)/obj-pic/$(GEN)/%.o: $(GEN)/%.c $(PROTO_H)
	@mkdir -p $(dir $@)
	@echo "  CC      $< (PIC)"
	@$(CC) $(CFLAGS_ALL) -fPIC -Wno-error -Wno-missing-braces -Wno-missing-prototypes -MMD -MP -c $< -o $@

$(OUT)/obj-pic/src/%.o: src/%.c
	@mkdir -p $(dir $@)
	@echo "  CC      $< (PIC)"
	@$(CC) $(CFLAGS_ALL) -fPIC -MMD -MP -c $< -o $@

$(LIBASB_SO): $(LIBASB_OBJ) $(LIBASB_PB_OBJ)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	@$(CC) -shared -Wl,-soname,libasb.so.0 $(SAN) -Wl,-z,relro,-z,now -Wl,--as-needed \
	  -Wl,-z,defs $(LDFLAGS) -o $@ $^ $(shell pkg-config --libs $(LIBASB_PKGS)) -lhttp_parser \
	  -lpthread

$(OUT)/lib/libasb.so: $(LIBASB_SO)
	@ln -sf libasb.so.0 $@

$(OUT)/lib/libasb.a: $(LIBASB_OBJ) $(LIBASB_PB_OBJ)
	@mkdir -p $(dir $@)
	@echo "  AR      $@"
	@rm -f $@ && ar rcs $@ $^

# pkg-config file for the library in this tree (prefix = the build directory).
$(OUT)/lib/pkgconfig/libasb.pc: Makefile
	@mkdir -p $(dir $@)
	@printf '%s\n' 'libdir=$(abspath $(OUT)/lib)' 'includedir=$(abspath include)' '' \
	  'Name: libasb' 'Description: Agent Sandbox client library' 'Version: 0.1.0' \
	  'Requires.private: $(LIBASB_PKGS)' 'Cflags: -I$${includedir}' \
	  'Libs: -L$${libdir} -lasb' 'Libs.private: -lhttp_parser -lpthread' > $@

fuzz-build: deps
	@$(MAKE) --no-print-directory BUILD=fuzz $(FUZZ_BIN)

# `make fuzz FUZZ_SECONDS=60` runs every target for a while, starting from the corpus in the tree.
FUZZ_SECONDS ?= 30
fuzz: fuzz-build
	@for f in $(FUZZ_BIN); do n=$$(basename $$f); mkdir -p build/fuzz/corpus/$$n; \
	  $$f -max_total_time=$(FUZZ_SECONDS) build/fuzz/corpus/$$n fuzz/corpus/$$n || exit 1; done

test: deps
	@$(MAKE) --no-print-directory BUILD=release binaries
	@$(MAKE) --no-print-directory BUILD=asan binaries
	@$(MAKE) --no-print-directory fuzz-build
	@/usr/bin/python3 tests/run-tests.py --build build/asan

# OCI image layouts (no container daemon) of sandboxd, asb-controller and sandbox-router in
# build/images/<name> (tag 0.1.0) and oci-archive tarballs build/images/<name>.tar.
images: all
	@bash scripts/make-images.sh $(OUT)/bin $(OUT)/images

bench: all
	@bash bench/run.sh

# Crash consistency: SIGKILL of asb serve under a mixed workload, invariants checked after every
# round (bench/chaos.py; CHAOS_ROUNDS=200 for a long run, CHAOS_SEED to replay one).
CHAOS_ROUNDS ?= 20
chaos: all
	@/usr/bin/python3 bench/chaos.py --rounds $(CHAOS_ROUNDS)

demo: all
	@bash scripts/demo.sh

# README's two commands on a brand-new machine: a debootstrapped bookworm root, the committed tree.
fresh-check:
	@bash scripts/fresh-check.sh

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf build

-include $(shell find build -name '*.d' 2>/dev/null)

# The CLI's JSONPath templates are unit-tested on their own (the CLI is not in ALL_LIB_OBJ).
$(OUT)/tests/test-cli-jsonpath: $(call obj,src/cli/asb-jsonpath.c)
$(OUT)/tests/test-cli-events: $(call obj,src/cli/asb-events.c src/cli/asb-table.c)
