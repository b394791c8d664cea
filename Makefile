# dtrain - top-level wrapper. The two commands:
#   make run    install what is missing, build, run the main job
#   make test   install what is missing, build, run the whole test suite
# make build configures and builds only: it installs nothing (make deps does).
BUILD ?= build
NP ?= 2
EPOCHS ?= 10
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
# Debian packages the build and tests need (installed with apt-get when missing).
DEB_PKGS = cmake make gcc libopenmpi-dev openmpi-bin libopenblas-dev zlib1g-dev libjansson-dev \
           dataset-fashion-mnist fortunes python3 python3-numpy python3-torch iproute2 python3-matplotlib
export OMPI_ALLOW_RUN_AS_ROOT = 1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM = 1
MPIRUN = mpirun --oversubscribe

.PHONY: all deps build run test test-nompi gpu-test bench install clean check check-tools check-deps sanitize valgrind fuzz
FUZZ_SECONDS ?= 60
CHECK_PKGS = clang valgrind

all: build

deps:
	@missing=""; for p in $(DEB_PKGS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q $$missing; \
	fi

$(BUILD)/Makefile: CMakeLists.txt
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS)

# The main job: train LeNet on Fashion-MNIST, data parallel on $(NP) local ranks.
run: deps
	@$(MAKE) --no-print-directory build
	$(MPIRUN) -np $(NP) $(BUILD)/bin/dtrain-train --model lenet --epochs $(EPOCHS) --lr 0.1

test: deps
	@$(MAKE) --no-print-directory build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The build without MPI (standalone and tcp bootstraps, void transport): the
# suite with every MPI job skipped (exit 77).
test-nompi: deps
	cmake -S . -B $(BUILD)-nompi -DCMAKE_BUILD_TYPE=Release -DDTRAIN_WITH_MPI=OFF $(CMAKE_FLAGS)
	cmake --build $(BUILD)-nompi -j $(JOBS)
	cd $(BUILD)-nompi && ctest --output-on-failure -j $(JOBS)

# The GPU suite, on a machine with a CUDA GPU (no apt there: no deps step):
# builds the CUDA variant in build-gpu, runs the GPU tests and the device
# benchmarks, writes $$OUT (default gpu-out). See tests/gpu/run_gpu_suite.sh;
# for the processes that share the GPU it needs MPI, or Open MPI's packages
# fetched beforehand with tools/gpu/fetch_debs.sh (carried in .gpu-debs).
gpu-test:
	bash tests/gpu/run_gpu_suite.sh

# Reliability tooling (CI runs `make test` then `make check-tools`):
#   sanitize  the suite, MPI tests included, in an ASan + UBSan build, less the
#             runs that repeat code another run there executes (SAN_EXCLUDE)
#   valgrind  memcheck over the unit tests
#   fuzz      libFuzzer targets (IDX reader, config parser, trainer flags,
#             safetensors, checkpoint manifest), FUZZ_SECONDS each
check-deps: deps
	@$(MAKE) --no-print-directory deps DEB_PKGS="$(CHECK_PKGS)"
sanitize: deps
	JOBS=$(JOBS) tests/tools/run_sanitizers.sh $(BUILD)-asan
valgrind: check-deps
	JOBS=$(JOBS) tests/tools/run_valgrind.sh $(BUILD)-vg
fuzz: check-deps
	JOBS=$(JOBS) FUZZ_BUILD=$(BUILD)-fuzz tests/tools/run_fuzz.sh $(FUZZ_SECONDS)
check-tools: sanitize valgrind fuzz
check: test check-tools

install: build
	cmake --install $(BUILD)

clean:
	rm -rf $(BUILD) $(BUILD)-nompi
