# sipp's build. `make` builds libsipp, the CLI and the tools against the pinned llama.cpp;
# `make demo` runs sipp on sipp-demo, the small model trained here (models/); `make test` runs the
# whole suite.
#
#   make BACKENDS="cpu vulkan rpc"  the default on Linux x64: core libraries + CPU, Vulkan and RPC modules
#                                (rpc: ggml's RPC backend, compiled from the pinned source in seconds)
#   make BACKENDS=cpu            a CPU-only artifact
#   make LLAMA_FROM_SOURCE=1     build llama.cpp (CPU) from the pinned source instead of prebuilt;
#                                the artifact is build/artifacts/cpu-src
#
# Outputs live under build/: build/bin/sipp, build/lib/libsipp.so, build/artifacts/NAME/ (the llama.cpp
# libraries with the chosen backend modules) and build/artifact, the default artifact.

LLAMA_FROM_SOURCE ?= 0
# Vulkan comes prebuilt only (it does not build from source on Debian 12), so a source build is CPU.
BACKENDS ?= $(if $(filter 1,$(LLAMA_FROM_SOURCE)),cpu,cpu vulkan rpc)
BUILD ?= build

empty :=
space := $(empty) $(empty)
ARTIFACT_NAME := $(subst $(space),+,$(strip $(BACKENDS)))$(if $(filter 1,$(LLAMA_FROM_SOURCE)),-src)
# llama.cpp is laid out once, in build/, also for sanitizer builds in another BUILD directory.
LLAMA_ROOT := build
ART := $(LLAMA_ROOT)/artifacts/$(ARTIFACT_NAME)
LLAMA_INC := $(LLAMA_ROOT)/llama/include
# whisper.h of the pinned whisper.cpp (deps/whisper.lock), for src/speech only
WHISPER_INC := $(LLAMA_ROOT)/whisper/include
LLAMA_STAMP := $(ART)/manifest.json

LLAMA_RELEASE := $(shell sed -n 's/^LLAMA_RELEASE=//p' deps/llama.lock)
LLAMA_COMMIT := $(shell sed -n 's/^LLAMA_COMMIT=//p' deps/llama.lock)
SIPP_VERSION := 0.1.0

CC ?= cc
WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wno-unused-parameter
CFLAGS ?= -O2 -g
CXXFLAGS ?= -O2 -g
# make DEBUG=1: the debug checks of the engine's locking and slot rules (SIPP_ASSERT_ENGINE_LOCKED, ...,
# src/engine/state.h). The sanitizer builds of make test turn them on.
DEBUG ?= 0
# Every symbol is hidden unless sipp.h declares it SIPP_API: libsipp.so exports its API and nothing else.
SIPP_CFLAGS := -std=c11 -D_GNU_SOURCE -fPIC -pthread -fvisibility=hidden $(WARN) -Iinclude -Isrc -I$(LLAMA_INC) -I$(WHISPER_INC) \
  -DSIPP_VERSION='"$(SIPP_VERSION)"' -DSIPP_LLAMA_RELEASE='"$(LLAMA_RELEASE)"' -DSIPP_LLAMA_COMMIT='"$(LLAMA_COMMIT)"' \
  $(if $(filter 1,$(DEBUG)),-DSIPP_DEBUG) $(EXTRA_CFLAGS)
LLAMA_LIBS := -L$(BUILD)/artifact -lllama-common -lllama -lggml -lggml-base -lstdc++
# The C++ bridges (src/chat/chat_bridge.cpp, src/model/mtmd_bridge.cpp), against the pinned tree's common/ headers: g++ (the
# compiler libllama-common.so was built with, so the C++ ABI matches), no exceptions leave it.
CXX ?= g++
LLAMA_SOURCE := $(LLAMA_ROOT)/llama/source
SIPP_CXXFLAGS := -std=c++17 -fPIC -pthread -fvisibility=hidden -Wall -Wextra -Werror -Wno-unused-parameter -Iinclude -Isrc -I$(LLAMA_INC) -I$(WHISPER_INC) \
  -isystem $(LLAMA_SOURCE)/include -isystem $(LLAMA_SOURCE)/common -isystem $(LLAMA_SOURCE)/vendor $(EXTRA_CXXFLAGS)
# Speech (src/speech): Debian's flite and its voices (a voice with no model file), and the audio
# encoders of /v1/audio/speech and `sipp speak` (libFLAC, libmp3lame, libopus + libogg).
FLITE_LIBS := -lflite_cmu_us_kal -lflite_cmu_us_kal16 -lflite_cmu_us_slt -lflite_cmu_us_rms -lflite_cmu_us_awb \
  -lflite_usenglish -lflite_cmulex -lflite
AUDIO_LIBS := -lFLAC -lmp3lame -lopus -logg
SYS_LIBS := -ljansson -lcrypto -lcurl -lpthread -lm -ldl $(FLITE_LIBS) $(AUDIO_LIBS)

LIB_SRCS := $(sort $(wildcard src/util/*.c src/backend/*.c src/store/*.c src/model/*.c src/chat/*.c src/engine/*.c \
  src/speech/*.c src/verify/*.c))
LIB_CXX_SRCS := src/chat/chat_bridge.cpp src/model/mtmd_bridge.cpp src/speech/whisper_bridge.cpp
# libsipp-util.a: the helpers clients may link beside libsipp.so (strings, buffers, errors, TOML);
# docs/architecture.md states the rule.
UTIL_SRCS := $(sort $(wildcard src/util/*.c))
UTIL_OBJS := $(UTIL_SRCS:%.c=$(BUILD)/obj/%.o)
CLI_SRCS := $(sort $(wildcard src/cli/*.c src/gateway/*.c src/gateway/*/*.c))
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o) $(LIB_CXX_SRCS:%.cpp=$(BUILD)/obj/%.o)
# The web page's files are embedded in the sipp binary (scripts/embed_assets.py writes a C table).
# Its /app.js and /style.css are bundles (scripts/bundle_web.py): the libraries of deps/web.lock
# (fetched and checked by deps/fetch-web.sh, cached outside the tree) and the page's own web/src/
# files, in this order.
WEB_GEN := $(BUILD)/gen/web
WEB_VENDOR := $(BUILD)/gen/web-vendor
WEB_PAGE_JS := web/src/gateway.js web/src/render.js web/src/store.js web/src/conversations.js \
  web/src/models.js web/src/charts.js web/src/voice.js web/src/chat.js
WEB_PAGE_CSS := web/src/style.css
WEB_FILES := $(sort $(wildcard web/*.html web/*.svg)) $(WEB_GEN)/app.js $(WEB_GEN)/style.css
# The browser package too, for the page's "run in this browser" mode (served at /browser/).
WEB_PKG_FILES := $(sort $(wildcard bindings/web/*.js))
WEB_ASSETS_C := $(BUILD)/gen/web_assets.c
CLI_OBJS := $(CLI_SRCS:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/gen/web_assets.o
SYNTH_SRCS := $(sort $(wildcard tools/synth/*.c))
SYNTH_OBJS := $(SYNTH_SRCS:%.c=$(BUILD)/obj/%.o)
TRAIN_SRCS := $(sort $(wildcard tools/train/*.c))
TRAIN_OBJS := $(TRAIN_SRCS:%.c=$(BUILD)/obj/%.o)
UNIT_SRCS := $(sort $(wildcard tests/unit/test_*.c))
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/%)
TOOL_SRCS := $(sort $(wildcard tests/tools/*.c))
TOOL_BINS := $(TOOL_SRCS:tests/tools/%.c=$(BUILD)/tests/%)

# The artifact's bill of materials (deps/sbom.py), the man page (sipp --man), the release.
SBOM := $(ART)/sbom.spdx.json
MAN := $(BUILD)/share/man/man1/sipp.1
PREFIX ?= /usr/local
DIST_NAME := sipp-$(SIPP_VERSION)-linux-x64
DIST_TGZ := $(BUILD)/$(DIST_NAME).tar.gz
LIBSIPP := $(BUILD)/lib/libsipp.so
LIBSIPP_A := $(BUILD)/lib/libsipp.a
LIBSIPP_UTIL := $(BUILD)/lib/libsipp-util.a
SIPP := $(BUILD)/bin/sipp
SYNTH := $(BUILD)/bin/sipp-synth
TRAIN := $(BUILD)/bin/sipp-train

.PHONY: all deps setup demo demo-model test check hooks clean format bindings fuzz-bins test-bins unit-bins dist install image
all: $(SIPP) $(SYNTH) $(TRAIN) $(LIBSIPP) $(LIBSIPP_A) $(SBOM) $(MAN)

setup:
	@bash scripts/setup-debian.sh

# The pinned llama.cpp; fetch.sh is a no-op past its caches, and runs again if the lock changes.
$(LLAMA_STAMP): deps/llama.lock deps/fetch.sh deps/npm.sh deps/whisper.lock deps/build-whisper.sh
	@LLAMA_FROM_SOURCE=$(LLAMA_FROM_SOURCE) bash deps/fetch.sh $(LLAMA_ROOT) $(BACKENDS) >/dev/null

# BUILD/artifact names the artifact of that build tree; its binaries find their libraries through it
# ($ORIGIN/../artifact). A second tree (sanitizers, a source build) points at its own artifact and
# leaves build/artifact alone.
.PHONY: llama-links
llama-links: $(LLAMA_STAMP)
	@mkdir -p $(BUILD)
	@ln -sfn $(if $(filter $(LLAMA_ROOT),$(BUILD)),artifacts/$(ARTIFACT_NAME),$(abspath $(ART))) $(BUILD)/artifact
deps: llama-links

$(BUILD)/obj/%.o: %.c $(LLAMA_STAMP) Makefile | $(BUILD)/obj llama-links
	@mkdir -p $(dir $@)
	@echo "  CC  $<"
	@$(CC) $(CFLAGS) $(SIPP_CFLAGS) -MMD -MP -c $< -o $@

# The pinned source's vendored miniaudio, which sipp decodes audio clips with (src/model/miniaudio.c
# compiles it, with its own warnings off: it is llama.cpp's dependency, not sipp's code).
MINIAUDIO_USERS := $(BUILD)/obj/src/model/miniaudio.o $(BUILD)/obj/src/model/audio_decode.o
$(MINIAUDIO_USERS): CFLAGS += -isystem $(LLAMA_SOURCE)/vendor
$(BUILD)/obj/src/model/miniaudio.o: CFLAGS += -w

$(BUILD)/obj/%.o: %.cpp $(LLAMA_STAMP) | $(BUILD)/obj llama-links
	@mkdir -p $(dir $@)
	@echo "  CXX $<"
	@$(CXX) $(CXXFLAGS) $(SIPP_CXXFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/obj:
	@mkdir -p $@

$(WEB_VENDOR)/.ok: deps/web.lock deps/fetch-web.sh deps/npm.sh
	@rm -rf $(WEB_VENDOR)
	@bash deps/fetch-web.sh $(WEB_VENDOR)
	@touch $@

$(WEB_GEN)/app.js $(WEB_GEN)/style.css &: $(WEB_VENDOR)/.ok $(WEB_PAGE_JS) $(WEB_PAGE_CSS) scripts/bundle_web.py deps/web.lock
	@echo "  GEN $(WEB_GEN)/app.js $(WEB_GEN)/style.css"
	@python3 scripts/bundle_web.py $(WEB_GEN) $(WEB_VENDOR) --js $(WEB_PAGE_JS) --css $(WEB_PAGE_CSS)

$(WEB_ASSETS_C): $(WEB_FILES) $(WEB_PKG_FILES) scripts/embed_assets.py
	@mkdir -p $(dir $@)
	@python3 scripts/embed_assets.py $@ $(WEB_FILES) --prefix /browser/ $(WEB_PKG_FILES)

$(BUILD)/obj/gen/web_assets.o: $(WEB_ASSETS_C)
	@mkdir -p $(dir $@)
	@echo "  CC  $<"
	@$(CC) $(CFLAGS) $(SIPP_CFLAGS) -c $< -o $@

$(LIBSIPP): $(LIB_OBJS) src/libsipp.version
	@mkdir -p $(dir $@)
	@echo "  LD  $@"
	@$(CC) -shared $(LDFLAGS_EXTRA) -o $@ $(LIB_OBJS) $(LLAMA_LIBS) $(SYS_LIBS) -Wl,-soname,libsipp.so \
	  -Wl,--version-script=src/libsipp.version -Wl,-rpath,'$$ORIGIN/../artifact'

# The static archive of every library object, for the unit tests, which test internals.
$(LIBSIPP_A): $(LIB_OBJS)
	@mkdir -p $(dir $@)
	@rm -f $@
	@ar rcs $@ $^

$(LIBSIPP_UTIL): $(UTIL_OBJS)
	@mkdir -p $(dir $@)
	@rm -f $@
	@ar rcs $@ $^

# The clients link libsipp.so: a call across the boundary to anything sipp.h does not export fails
# to link. The CLI finds libsipp.so beside it ($ORIGIN/../lib) and llama.cpp's libraries through
# libsipp.so's own rpath.
CLIENT_LIBS := -L$(BUILD)/lib -lsipp $(LIBSIPP_UTIL) -Wl,-rpath,'$$ORIGIN/../lib'

$(SIPP): $(CLI_OBJS) $(LIBSIPP) $(LIBSIPP_UTIL)
	@mkdir -p $(dir $@)
	@echo "  LD  $@"
	@$(CC) $(LDFLAGS_EXTRA) -o $@ $(CLI_OBJS) $(CLIENT_LIBS) -ljansson -lmicrohttpd -lcurl -lcrypto -lpthread -lm

# sipp-synth writes GGUF files with ggml's gguf API (libggml-base) and uses nothing else of libsipp.
$(SYNTH): $(SYNTH_OBJS) $(LIBSIPP) $(LIBSIPP_UTIL)
	@mkdir -p $(dir $@)
	@echo "  LD  $@"
	@$(CC) $(LDFLAGS_EXTRA) -o $@ $(SYNTH_OBJS) $(CLIENT_LIBS) -L$(BUILD)/artifact -lggml-base -lm -Wl,-rpath,'$$ORIGIN/../artifact'

# sipp-train trains its own ggml graph of a model with ggml-opt (libggml-base), tokenizes and quantizes
# with libllama directly, and of sipp uses only the helpers of libsipp-util.a.
$(TRAIN): $(TRAIN_OBJS) $(LIBSIPP_UTIL) $(LLAMA_STAMP) | llama-links
	@mkdir -p $(dir $@)
	@echo "  LD  $@"
	@$(CC) $(LDFLAGS_EXTRA) -o $@ $(TRAIN_OBJS) $(LIBSIPP_UTIL) -L$(BUILD)/artifact -lllama -lggml -lggml-base -ljansson -lm -lpthread \
	  -Wl,-rpath,'$$ORIGIN/../artifact'

# The SBOM lists the artifact's files, what sipp links against, the models it ships (models/) and
# the commit it was built from, so it follows the binaries, those and the commit. The commit stamp
# is rewritten only when HEAD moves, so an unchanged tree rebuilds nothing.
GIT_HEAD := $(BUILD)/git-head
$(GIT_HEAD): FORCE
	@mkdir -p $(dir $@)
	@head=$$(git rev-parse HEAD 2>/dev/null || echo none); \
	  [ "$$(cat $@ 2>/dev/null)" = "$$head" ] || echo "$$head" >$@
.PHONY: FORCE
FORCE:

$(SBOM): $(LLAMA_STAMP) $(SIPP) $(LIBSIPP) deps/sbom.py $(GIT_HEAD) $(wildcard models/models.json models/*.gguf)
	@echo "  SBOM $@"
	@SIPP_VERSION=$(SIPP_VERSION) python3 deps/sbom.py $(ART) $(SIPP) $(LIBSIPP) >/dev/null

# The man page comes from the same command table as sipp --help.
$(MAN): $(SIPP)
	@mkdir -p $(dir $@)
	@$(SIPP) --man >$@.tmp && mv $@.tmp $@

# make dist: the release tarball (scripts/stage.sh lays it out, its install.sh installs it).
# make install PREFIX=... [DESTDIR=...]: the same tree, installed by the same install.sh.
# make dist SIGN=KEY.pem signs the release's artifact with that Ed25519 key.
dist: all
	@SIPP_SIGN_KEY=$(SIGN) bash scripts/stage.sh $(BUILD)/dist/$(DIST_NAME) $(BUILD) $(SIPP_VERSION) >/dev/null
	@tar czf $(DIST_TGZ) -C $(BUILD)/dist $(DIST_NAME)
	@echo "$(DIST_TGZ)"

# make image [FLAVOR=cpu|vulkan|cuda]: the container image localhost/sipp:VERSION-FLAVOR, its OCI
# archive, SBOM and digests under build/image/ (deploy/container/image.sh; docs/scale-out.md).
FLAVOR ?= cpu
image: all
	@bash deploy/container/image.sh $(FLAVOR) $(SIPP_VERSION) $(BUILD)

install: all
	@bash scripts/stage.sh $(BUILD)/stage $(BUILD) $(SIPP_VERSION) >/dev/null
	@DESTDIR=$(DESTDIR) bash $(BUILD)/stage/install.sh --prefix $(PREFIX)

# Unit tests link libsipp statically so that internal modules (toml, utf8, ...) can be tested.
$(BUILD)/tests/test_%: tests/unit/test_%.c $(LIBSIPP_A)
	@mkdir -p $(dir $@)
	@echo "  LD  $@"
	@$(CC) $(CFLAGS) $(SIPP_CFLAGS) $(LDFLAGS_EXTRA) -o $@ $< $(LIBSIPP_A) $(LLAMA_LIBS) $(SYS_LIBS) -lcriterion -Wl,-rpath,'$$ORIGIN/../artifact'

$(BUILD)/tests/%: tests/tools/%.c $(LIBSIPP_A)
	@mkdir -p $(dir $@)
	@echo "  LD  $@"
	@$(CC) $(CFLAGS) $(SIPP_CFLAGS) $(LDFLAGS_EXTRA) -o $@ $< $(LIBSIPP_A) $(LLAMA_LIBS) $(SYS_LIBS) -Wl,-rpath,'$$ORIGIN/../artifact'

# mtmd_probe drives llama.cpp's libmtmd directly, with no sipp code in between (test_synth_projector).
$(BUILD)/tests/mtmd_probe: tests/tools/mtmd_probe.c $(LLAMA_STAMP) | llama-links
	@mkdir -p $(dir $@)
	@echo "  LD  $@"
	@$(CC) $(CFLAGS) $(SIPP_CFLAGS) $(LDFLAGS_EXTRA) -o $@ $< -L$(BUILD)/artifact -lmtmd -lllama -lggml -lggml-base \
	  -ldl -Wl,-rpath,'$$ORIGIN/../artifact'

# libFuzzer harnesses (clang). Each lists the sources it exercises, built with the fuzzer's
# instrumentation; tests/run.sh runs each briefly from its seed corpus (tests/fuzz/corpus/NAME).
FUZZ_CFLAGS := -g -O1 -fsanitize=fuzzer,address,undefined -std=c11 -D_GNU_SOURCE -pthread -Iinclude -Isrc -I$(LLAMA_INC)
FUZZ_toml_SRCS := tests/fuzz/fuzz_toml.c src/util/toml.c
FUZZ_request_SRCS := tests/fuzz/fuzz_request.c src/gateway/request_parse.c src/gateway/media_parts.c src/gateway/errors.c \
  src/util/util.c
FUZZ_rpc_SRCS := tests/fuzz/fuzz_rpc.c src/backend/rpc_parse.c src/util/util.c
FUZZ_lark_SRCS := tests/fuzz/fuzz_lark.c src/chat/lark_gbnf.c src/util/util.c
FUZZ_config_SRCS := tests/fuzz/fuzz_config.c src/gateway/config.c src/gateway/config_keys.c \
  src/gateway/config_table.c src/gateway/errors.c src/gateway/models_dir.c \
  src/util/toml.c src/util/util.c
FUZZ_range_SRCS := tests/fuzz/fuzz_range.c src/gateway/http/range.c
FUZZ_media_SRCS := tests/fuzz/fuzz_media.c src/util/base64.c src/util/media_sniff.c
# how a refusal shows the URL of an image the gateway fetched (media_parts.c)
FUZZ_media_url_SRCS := tests/fuzz/fuzz_media_url.c src/gateway/media_parts.c src/util/util.c
FUZZ_multipart_SRCS := tests/fuzz/fuzz_multipart.c src/gateway/http/multipart.c
# what an MCP server sends the gateway: JSON-RPC messages, event streams, tool lists and results
FUZZ_mcp_rpc_SRCS := tests/fuzz/fuzz_mcp_rpc.c src/gateway/mcp_rpc.c src/gateway/errors.c src/util/util.c
# an audio clip's header measured and the clip decoded with the pinned miniaudio (src/model/audio_decode.c)
FUZZ_audio_SRCS := tests/fuzz/fuzz_audio.c src/model/audio_decode.c src/util/media_sniff.c src/util/util.c \
  src/util/last_error.c
$(BUILD)/fuzz/fuzz_toml: $(FUZZ_toml_SRCS)
	@mkdir -p $(dir $@)
	@echo "  FUZZ $@"
	@clang $(FUZZ_CFLAGS) $^ -o $@
$(BUILD)/fuzz/fuzz_range: $(FUZZ_range_SRCS)
	@mkdir -p $(dir $@)
	@echo "  FUZZ $@"
	@clang $(FUZZ_CFLAGS) $^ -o $@
$(BUILD)/fuzz/fuzz_media: $(FUZZ_media_SRCS)
	@mkdir -p $(dir $@)
	@echo "  FUZZ $@"
	@clang $(FUZZ_CFLAGS) $^ -o $@
$(BUILD)/fuzz/fuzz_media_url: $(FUZZ_media_url_SRCS)
	@mkdir -p $(dir $@)
	@echo "  FUZZ $@"
	@clang $(FUZZ_CFLAGS) $^ -o $@ -ljansson
# miniaudio itself is compiled without the fuzzer's instrumentation (it is llama.cpp's dependency; the
# harness searches sipp's checks), once, beside the harness.
$(BUILD)/fuzz/miniaudio.o: src/model/miniaudio.c $(LLAMA_STAMP)
	@mkdir -p $(dir $@)
	@clang -g -O1 -fsanitize=address -std=c11 -D_GNU_SOURCE -Isrc -isystem $(LLAMA_SOURCE)/vendor -w -c $< -o $@
$(BUILD)/fuzz/fuzz_audio: $(FUZZ_audio_SRCS) $(BUILD)/fuzz/miniaudio.o
	@mkdir -p $(dir $@)
	@echo "  FUZZ $@"
	@clang $(FUZZ_CFLAGS) -isystem $(LLAMA_SOURCE)/vendor $^ -o $@ -lm -lpthread -ldl
$(BUILD)/fuzz/fuzz_mcp_rpc: $(FUZZ_mcp_rpc_SRCS)
	@mkdir -p $(dir $@)
	@echo "  FUZZ $@"
	@clang $(FUZZ_CFLAGS) $^ -o $@ -ljansson
$(BUILD)/fuzz/fuzz_multipart: $(FUZZ_multipart_SRCS)
	@mkdir -p $(dir $@)
	@echo "  FUZZ $@"
	@clang $(FUZZ_CFLAGS) $^ -o $@
$(BUILD)/fuzz/fuzz_request: $(FUZZ_request_SRCS) $(LIBSIPP)
	@mkdir -p $(dir $@)
	@echo "  FUZZ $@"
	@clang $(FUZZ_CFLAGS) $(FUZZ_request_SRCS) -o $@ -L$(BUILD)/lib -lsipp -ljansson -Wl,-rpath,'$$ORIGIN/../lib'
$(BUILD)/fuzz/fuzz_rpc: $(FUZZ_rpc_SRCS) $(LLAMA_STAMP)
	@mkdir -p $(dir $@)
	@echo "  FUZZ $@"
	@clang $(FUZZ_CFLAGS) $(FUZZ_rpc_SRCS) -o $@ -lm
$(BUILD)/fuzz/fuzz_lark: $(FUZZ_lark_SRCS) $(LLAMA_STAMP)
	@mkdir -p $(dir $@)
	@echo "  FUZZ $@"
	@clang $(FUZZ_CFLAGS) $(FUZZ_lark_SRCS) -o $@ -lm
$(BUILD)/fuzz/fuzz_config: $(FUZZ_config_SRCS) $(LIBSIPP)
	@mkdir -p $(dir $@)
	@echo "  FUZZ $@"
	@clang $(FUZZ_CFLAGS) $(FUZZ_config_SRCS) -o $@ -L$(BUILD)/lib -lsipp -ljansson -Wl,-rpath,'$$ORIGIN/../lib'

# The library's parsers: the sources under test are instrumented, the rest of libsipp comes from the
# static archive (its objects that the harness's own sources replace are never pulled in).
FUZZ_catalog_SRCS := tests/fuzz/fuzz_catalog.c src/store/catalog.c
FUZZ_store_meta_SRCS := tests/fuzz/fuzz_store_meta.c src/store/store.c
FUZZ_manifest_SRCS := tests/fuzz/fuzz_manifest.c src/verify/manifest.c src/verify/distance.c
FUZZ_gguf_SRCS := tests/fuzz/fuzz_gguf.c src/store/gguf_info.c
FUZZ_gguf_header_SRCS := tests/fuzz/fuzz_gguf_header.c src/store/gguf_header.c src/model/model_check.c
# whisper.cpp model files, as `sipp pull` checks a download (issue 46)
FUZZ_whisper_file_SRCS := tests/fuzz/fuzz_whisper_file.c src/store/whisper_file.c
# a chat's fields (chat_request.c) and what they reach of llama.cpp's chat library through the bridge
FUZZ_chat_SRCS := tests/fuzz/fuzz_chat.c src/chat/chat_request.c
FUZZ_signature_SRCS := tests/fuzz/fuzz_signature.c src/backend/signature.c
# the bounds on request schemas and the conversion to a grammar they guard (issue 27)
FUZZ_schema_SRCS := tests/fuzz/fuzz_schema.c src/util/schema_limits.c src/chat/schema_convert.c
# the Responses, Messages and Ollama request translations (the gateway's stand-ins are in the harness)
FUZZ_translate_SRCS := tests/fuzz/fuzz_translate.c src/gateway/api/translate.c src/gateway/fleet/dispatch.c \
  src/gateway/kinds/kind.c src/gateway/kinds/llama.c src/gateway/kinds/remote.c src/gateway/kinds/supervised.c \
  src/gateway/kinds/relay.c src/gateway/format.c \
  src/gateway/api/responses.c src/gateway/api/responses_mcp.c src/gateway/mcp_client.c src/gateway/mcp_rpc.c \
  src/gateway/api/fields.c \
  src/gateway/api/anthropic.c src/gateway/api/ollama.c src/gateway/api/responses_store.c \
  src/gateway/request_parse.c src/gateway/media_parts.c src/gateway/kinds/media_fetch.c src/gateway/errors.c \
  src/gateway/http/sse.c src/gateway/http/ignored.c src/gateway/field_names.c src/gateway/api/ollama_duration.c
# the sentences text is spoken in, and the streaming resampler (src/speech)
FUZZ_speech_SRCS := tests/fuzz/fuzz_speech.c src/speech/speech_split.c src/speech/resample.c
FUZZ_LIB := catalog store_meta manifest gguf gguf_header chat signature translate schema speech whisper_file
define fuzz_lib_rule
$(BUILD)/fuzz/fuzz_$(1): $$(FUZZ_$(1)_SRCS) $(LIBSIPP_A)
	@mkdir -p $$(dir $$@)
	@echo "  FUZZ $$@"
	@clang $(FUZZ_CFLAGS) $$(FUZZ_$(1)_SRCS) -o $$@ $(LIBSIPP_A) $(LLAMA_LIBS) $(SYS_LIBS) -Wl,-rpath,'$$$$ORIGIN/../artifact'
endef
$(foreach h,$(FUZZ_LIB),$(eval $(call fuzz_lib_rule,$(h))))

FUZZ_BINS := $(BUILD)/fuzz/fuzz_toml $(BUILD)/fuzz/fuzz_range $(BUILD)/fuzz/fuzz_media $(BUILD)/fuzz/fuzz_media_url \
  $(BUILD)/fuzz/fuzz_audio \
  $(BUILD)/fuzz/fuzz_multipart $(BUILD)/fuzz/fuzz_mcp_rpc $(BUILD)/fuzz/fuzz_request $(BUILD)/fuzz/fuzz_config $(BUILD)/fuzz/fuzz_rpc \
  $(BUILD)/fuzz/fuzz_lark \
  $(FUZZ_LIB:%=$(BUILD)/fuzz/fuzz_%)
fuzz-bins: $(FUZZ_BINS)

# The Node.js addon (bindings/node/build.sh: plain C against the pinned Node-API headers).
bindings: $(LIBSIPP)
	@bash bindings/node/build.sh

test-bins: all bindings $(UNIT_BINS) $(TOOL_BINS)
unit-bins: $(UNIT_BINS)

# The demo: what a new user sees first. sipp-demo is a small chat model trained here from scratch
# (tools/train, docs/training.md) and committed in models/; it answers in its chat template, greedily.
DEMO_MODEL := models/sipp-demo.gguf

demo: setup
	@$(MAKE) --no-print-directory all
	@echo "== sipp $(DEMO_MODEL) (a 5M-parameter model trained by tools/train/demo-model.sh) =="
	$(SIPP) $(DEMO_MODEL) "Hello!" --chat --max-tokens 48 --temperature 0 --stats text

# make demo-voice: sipp-demo's answer to "Hello!", spoken by flite (no model file) into a WAV file.
DEMO_VOICE_WAV := $(BUILD)/demo-voice.wav
.PHONY: demo-voice
demo-voice: setup
	@$(MAKE) --no-print-directory all
	@answer=$$($(SIPP) $(DEMO_MODEL) "Hello!" --chat --max-tokens 48 --temperature 0) && \
	  echo "sipp-demo: $$answer" && $(SIPP) speak flite "$$answer" --voice slt -o $(DEMO_VOICE_WAV)

# sipp-demo and its draft, trained from scratch as the committed models/ files were (docs/training.md).
demo-model: all
	tools/train/demo-model.sh $(BUILD)/models

# ---- the browser runtime (make web) -------------------------------------------------------------
# libsipp's engine, backend and util sources and the pinned llama.cpp's CPU path compiled to
# WebAssembly with emscripten, twice: with pthreads (for cross-origin-isolated pages) and single
# threaded (any page). llama.cpp's static libraries are built once per llama.cpp commit, emcc version
# and variant in the cache (deps/build-web.sh); sipp's sources are compiled here and linked each time.
# Outputs: build/web/sipp-mt.{js,wasm,worker.js} and build/web/sipp-st.{js,wasm}; bindings/web loads them.
WEB_OUT := $(BUILD)/web
WEB_VARIANTS := mt st
# Left out: what needs jansson, OpenSSL or llama.cpp's chat library (src/chat,
# src/engine/request_json.c, src/backend/signature.c); the browser's answers are src/wasm/*_browser.c.
# The rpc files stay: the wasm ggml has no RPC backend, so rpc is refused there as not compiled.
WEB_NATIVE_ONLY := src/engine/request_json.c src/backend/signature.c src/model/mmproj.c src/model/audio_decode.c \
  src/model/miniaudio.c
WEB_SRCS := $(filter-out $(WEB_NATIVE_ONLY),$(sort $(wildcard src/backend/*.c src/model/*.c src/engine/*.c))) src/util/util.c \
  src/util/schema_defaults.c \
  src/util/last_error.c src/store/gguf_header.c src/store/gguf_info.c src/store/source.c src/wasm/store_browser.c \
  src/wasm/chat_browser.c src/wasm/signature_browser.c src/wasm/mmproj_browser.c \
  bindings/web/src/sipp_wasm.c
LLAMA_SRC_DIR := $(LLAMA_ROOT)/llama/source
WEB_CFLAGS := -O3 -msimd128 -std=c11 -D_GNU_SOURCE $(WARN) -Iinclude -Isrc -I$(LLAMA_SRC_DIR)/include \
  -I$(LLAMA_SRC_DIR)/ggml/include -DSIPP_VERSION='"$(SIPP_VERSION)"' -DSIPP_LLAMA_RELEASE='"$(LLAMA_RELEASE)"' \
  -DSIPP_LLAMA_COMMIT='"$(LLAMA_COMMIT)"'
WEB_THREAD_FLAGS_mt := -pthread
WEB_THREAD_FLAGS_st :=
# The pthread build keeps a pool of workers started with the module (a thread created later would
# need the worker's event loop, which a computing thread never returns to); the page sizes it.
# Exception handling as deps/build-web.sh compiled llama.cpp for the variant (see there why they differ).
WEB_LINK_mt := -pthread -fexceptions -sPTHREAD_POOL_SIZE=Module.sippPoolSize -Wno-pthreads-mem-growth
WEB_LINK_st := -fwasm-exceptions
# Debian's emscripten runs its JavaScript passes with node and finds their modules (acorn) in
# /usr/share/nodejs, which a Node.js installed from elsewhere does not search by itself.
EMCC_ENV := NODE_PATH=/usr/share/nodejs
WEB_LINK_OPT ?= -O1
WEB_LDFLAGS := $(WEB_LINK_OPT) -sMODULARIZE=1 -sEXPORT_NAME=createSippRuntime -sENVIRONMENT=web,worker \
  -sALLOW_MEMORY_GROWTH=1 -sINITIAL_MEMORY=67108864 -sMAXIMUM_MEMORY=4294967296 -sFORCE_FILESYSTEM=1 -lworkerfs.js \
  -sEXPORTED_FUNCTIONS=_malloc,_free -sEXPORTED_RUNTIME_METHODS=ccall,cwrap,UTF8ToString,stringToUTF8,lengthBytesUTF8,FS,WORKERFS

.PHONY: web web-llama-force
web: $(foreach v,$(WEB_VARIANTS),$(WEB_OUT)/sipp-$(v).js)

# The cached llama.cpp build of a variant: the script returns at once when the cache holds it.
$(WEB_OUT)/llama-%.dir: web-llama-force $(LLAMA_STAMP) deps/build-web.sh
	@mkdir -p $(dir $@)
	@bash deps/build-web.sh $* >$@.tmp && if cmp -s $@.tmp $@; then rm $@.tmp; else mv $@.tmp $@; fi
web-llama-force:

define WEB_VARIANT
$(WEB_OUT)/obj-$(1)/%.o: %.c $(LLAMA_STAMP) | llama-links
	@mkdir -p $$(dir $$@)
	@echo "  EMCC $$< ($(1))"
	@emcc $(WEB_CFLAGS) $(WEB_THREAD_FLAGS_$(1)) -MMD -MP -c $$< -o $$@

$(WEB_OUT)/sipp-$(1).js: $(WEB_SRCS:%.c=$(WEB_OUT)/obj-$(1)/%.o) $(WEB_OUT)/llama-$(1).dir
	@echo "  EMLD $$@"
	@L=$$$$(cat $(WEB_OUT)/llama-$(1).dir) && $(EMCC_ENV) emcc $(WEB_LDFLAGS) $(WEB_LINK_$(1)) -o $$@ \
	  $(WEB_SRCS:%.c=$(WEB_OUT)/obj-$(1)/%.o) $$$$L/src/libllama.a $$$$L/ggml/src/libggml.a \
	  $$$$L/ggml/src/libggml-cpu.a $$$$L/ggml/src/libggml-base.a
endef
$(foreach v,$(WEB_VARIANTS),$(eval $(call WEB_VARIANT,$(v))))
-include $(foreach v,$(WEB_VARIANTS),$(WEB_SRCS:%.c=$(WEB_OUT)/obj-$(v)/%.d))

test: setup
	@$(MAKE) --no-print-directory test-bins web
	@bash tests/run.sh

# make check: the edit-compile-test loop, under 3 minutes on 2 cores: the build, the browser
# runtime's link where its llama.cpp build is cached (a source the wasm build lacks fails there, not
# in CI), the format check, the lint and size check, the unit tests, and the smoke tests (one request
# to every gateway route, one server). make test runs all of it and the rest.
CHECK_TESTS := test_smoke.py,test_lint.py
check: all unit-bins hooks
	@if command -v emcc >/dev/null && bash deps/build-web.sh mt --if-cached >/dev/null 2>&1 && \
	  bash deps/build-web.sh st --if-cached >/dev/null 2>&1; then \
	  $(MAKE) --no-print-directory web; \
	else echo "  web: not linked (its llama.cpp build is not cached yet: make web builds it once)"; fi
	@SIPP_TEST_ONLY=format,lint,unit,integration SIPP_TEST_PATTERN='$(CHECK_TESTS)' bash tests/run.sh

# The repository's git hooks (scripts/hooks: commit-msg refuses subjects over 72 characters), unless
# this clone already names a hooks path of its own.
hooks:
	@if git rev-parse --git-dir >/dev/null 2>&1 && [ -z "$$(git config core.hooksPath)" ]; then \
	  git config core.hooksPath scripts/hooks && echo "  hooks: git config core.hooksPath scripts/hooks"; fi

clean:
	rm -rf $(BUILD) build-asan build-tsan bindings/node/build

format:
	clang-format -i $$(git ls-files '*.c' '*.h' '*.cpp')

-include $(LIB_OBJS:.o=.d) $(CLI_OBJS:.o=.d) $(SYNTH_OBJS:.o=.d) $(TRAIN_OBJS:.o=.d)
