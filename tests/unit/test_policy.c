/*
 * test_policy.c: backend names and the selection policy of src/backend/backend.h, on injected
 * machines (sipp_host_view), so that every rule can be checked without the hardware it talks about.
 *
 * The rules (select.c): an explicit backend always wins and cpu always works; an explicit GPU backend
 * must be compiled and available, else SIPP_ERR_BACKEND names the missing half and the next step; a
 * software device is used only when asked for explicitly; auto takes the first backend of the order
 * (argument, else $SIPP_BACKEND_ORDER, else cuda,metal,vulkan,webgpu) that is compiled and has a
 * hardware device, else cpu; every decision carries a reason.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"

#define LAVAPIPE "llvmpipe (LLVM 15.0.6, 256 bits)"

/* A machine with only the CPU backend compiled and its one device. */
static sipp_host_view cpu_host(void) {
    sipp_host_view v;
    memset(&v, 0, sizeof v);
    v.compiled[SIPP_BACKEND_CPU] = true;
    sipp_device_desc *d = &v.devices[v.n_devices++];
    d->backend = SIPP_BACKEND_CPU;
    strcpy(d->name, "CPU");
    strcpy(d->description, "Some x86 CPU");
    d->kind = SIPP_DEVICE_CPU;
    d->index = 0;
    return v;
}

static void compile(sipp_host_view *v, sipp_backend_id id) { v->compiled[id] = true; }

/* Adds a device the way sipp_host_discover describes one; returns its index in the view. */
static int add_device(sipp_host_view *v, sipp_backend_id id, const char *name, const char *description) {
    cr_assert_lt(v->n_devices, SIPP_MAX_DEVICES);
    int i = v->n_devices++;
    sipp_device_desc *d = &v->devices[i];
    memset(d, 0, sizeof *d);
    d->backend = id;
    strncpy(d->name, name, sizeof d->name - 1);
    strncpy(d->description, description, sizeof d->description - 1);
    d->software = sipp_device_is_software(description);
    d->kind = d->software ? SIPP_DEVICE_CPU : SIPP_DEVICE_GPU;
    d->index = i;
    return i;
}

/* Runs the policy and checks the common postconditions of a success. */
static sipp_policy_result decide_ok(const sipp_host_view *v, const char *requested, const char *order) {
    sipp_policy_result r;
    char err[SIPP_ERROR_SIZE] = "";
    sipp_status st = sipp_policy_decide(v, requested, order, &r, err);
    cr_assert_eq(st, SIPP_OK, "requested '%s' order '%s': status %d (%s)", requested,
                 order ? order : "(null)", st, err);
    cr_assert_gt(strlen(r.reason), 0, "a decision always has a reason");
    cr_assert_lt(strlen(r.reason), sizeof r.reason);
    if (r.backend == SIPP_BACKEND_CPU)
        cr_assert_eq(r.device, -1, "cpu has no device index");
    else {
        cr_assert(r.device >= 0 && r.device < v->n_devices, "device %d out of range", r.device);
        cr_assert_eq(v->devices[r.device].backend, r.backend, "the device belongs to the chosen backend");
    }
    return r;
}

/* Runs the policy expecting a failure; returns the message. */
static const char *decide_fail(const sipp_host_view *v, const char *requested, const char *order,
                               sipp_status want) {
    static char err[SIPP_ERROR_SIZE];
    err[0] = '\0';
    sipp_policy_result r;
    sipp_status st = sipp_policy_decide(v, requested, order, &r, err);
    cr_assert_eq(st, want, "requested '%s' order '%s': status %d, want %d (%s)", requested,
                 order ? order : "(null)", st, want, err);
    cr_assert_gt(strlen(err), 0, "a failure has a message");
    return err;
}

static void assert_contains(const char *hay, const char *needle) {
    cr_assert_not_null(strstr(hay, needle), "'%s' does not mention '%s'", hay, needle);
}

/* Every test that touches the environment starts from a clean one. */
static void clean_env(void) { unsetenv("SIPP_BACKEND_ORDER"); }

TestSuite(policy, .init = clean_env, .fini = clean_env);

/* ---- explicit choices -------------------------------------------------------------------------- */

Test(policy, explicit_cpu_always_works) {
    sipp_host_view empty;
    memset(&empty, 0, sizeof empty);
    sipp_policy_result r = decide_ok(&empty, "cpu", NULL);
    cr_assert_eq(r.backend, SIPP_BACKEND_CPU, "even with nothing compiled");

    sipp_host_view v = cpu_host();
    compile(&v, SIPP_BACKEND_CUDA);
    compile(&v, SIPP_BACKEND_VULKAN);
    add_device(&v, SIPP_BACKEND_CUDA, "CUDA0", "NVIDIA H100 80GB HBM3");
    add_device(&v, SIPP_BACKEND_VULKAN, "Vulkan0", "NVIDIA H100 80GB HBM3");
    r = decide_ok(&v, "cpu", NULL);
    cr_assert_eq(r.backend, SIPP_BACKEND_CPU, "an explicit cpu wins over available GPUs");
    r = decide_ok(&v, "cpu", "vulkan,cuda");
    cr_assert_eq(r.backend, SIPP_BACKEND_CPU, "the order only matters for auto");
}

Test(policy, explicit_gpu_not_compiled) {
    static const char *const gpus[] = {"cuda", "metal", "vulkan", "webgpu"};
    sipp_host_view v = cpu_host();
    for (size_t i = 0; i < sizeof gpus / sizeof gpus[0]; i++) {
        const char *msg = decide_fail(&v, gpus[i], NULL, SIPP_ERR_BACKEND);
        assert_contains(msg, gpus[i]);
        assert_contains(msg, "not compiled");
        assert_contains(msg, "make BACKENDS");
        assert_contains(msg, "cpu"); /* what is compiled */
    }
}

Test(policy, explicit_gpu_not_compiled_even_with_a_device_of_another_backend) {
    sipp_host_view v = cpu_host();
    compile(&v, SIPP_BACKEND_VULKAN);
    add_device(&v, SIPP_BACKEND_VULKAN, "Vulkan0", "AMD Radeon RX 7900 XTX (RADV NAVI31)");
    const char *msg = decide_fail(&v, "cuda", NULL, SIPP_ERR_BACKEND);
    assert_contains(msg, "not compiled");
    assert_contains(msg, "make BACKENDS");
    assert_contains(msg, "vulkan"); /* listed among the compiled ones */
}

Test(policy, explicit_gpu_compiled_without_device) {
    static const sipp_backend_id ids[] = {SIPP_BACKEND_CUDA, SIPP_BACKEND_METAL, SIPP_BACKEND_VULKAN,
                                          SIPP_BACKEND_WEBGPU};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        sipp_host_view v = cpu_host();
        compile(&v, ids[i]);
        const char *name = sipp_backend_name(ids[i]);
        const char *msg = decide_fail(&v, name, NULL, SIPP_ERR_BACKEND);
        assert_contains(msg, name);
        assert_contains(msg, "not available");
        cr_assert_null(strstr(msg, "not compiled"), "it is compiled: '%s'", msg);
    }
}

Test(policy, explicit_gpu_compiled_and_available) {
    sipp_host_view v = cpu_host();
    compile(&v, SIPP_BACKEND_CUDA);
    int dev = add_device(&v, SIPP_BACKEND_CUDA, "CUDA0", "NVIDIA H200");
    sipp_policy_result r = decide_ok(&v, "cuda", NULL);
    cr_assert_eq(r.backend, SIPP_BACKEND_CUDA);
    cr_assert_eq(r.device, dev);
}

Test(policy, explicit_vulkan_on_software_device_is_allowed) {
    sipp_host_view v = cpu_host();
    compile(&v, SIPP_BACKEND_VULKAN);
    int dev = add_device(&v, SIPP_BACKEND_VULKAN, "Vulkan0", LAVAPIPE);
    cr_assert(v.devices[dev].software);
    sipp_policy_result r = decide_ok(&v, "vulkan", NULL);
    cr_assert_eq(r.backend, SIPP_BACKEND_VULKAN, "an explicit choice may run on lavapipe");
    cr_assert_eq(r.device, dev);
    assert_contains(r.reason, "software");
}

Test(policy, explicit_vulkan_prefers_hardware_device) {
    sipp_host_view v = cpu_host();
    compile(&v, SIPP_BACKEND_VULKAN);
    add_device(&v, SIPP_BACKEND_VULKAN, "Vulkan0", LAVAPIPE);
    int hw = add_device(&v, SIPP_BACKEND_VULKAN, "Vulkan1", "Intel(R) Arc(tm) A770 Graphics (DG2)");
    sipp_policy_result r = decide_ok(&v, "vulkan", NULL);
    cr_assert_eq(r.backend, SIPP_BACKEND_VULKAN);
    cr_assert_eq(r.device, hw);
}

/* ---- auto -------------------------------------------------------------------------------------- */

Test(policy, auto_on_cpu_only_host) {
    sipp_host_view v = cpu_host();
    sipp_policy_result r = decide_ok(&v, "auto", NULL);
    cr_assert_eq(r.backend, SIPP_BACKEND_CPU);
}

Test(policy, auto_follows_default_order_not_device_order) {
    sipp_host_view v = cpu_host();
    compile(&v, SIPP_BACKEND_VULKAN);
    compile(&v, SIPP_BACKEND_CUDA);
    compile(&v, SIPP_BACKEND_METAL);
    compile(&v, SIPP_BACKEND_WEBGPU);
    add_device(&v, SIPP_BACKEND_WEBGPU, "WebGPU0", "NVIDIA H200");
    add_device(&v, SIPP_BACKEND_VULKAN, "Vulkan0", "NVIDIA H200");
    int metal = add_device(&v, SIPP_BACKEND_METAL, "Metal", "Apple M2 Max");
    int cuda = add_device(&v, SIPP_BACKEND_CUDA, "CUDA0", "NVIDIA H200");
    sipp_policy_result r = decide_ok(&v, "auto", NULL);
    cr_assert_eq(r.backend, SIPP_BACKEND_CUDA, "cuda comes first; got %s", sipp_backend_name(r.backend));
    cr_assert_eq(r.device, cuda);

    v.compiled[SIPP_BACKEND_CUDA] = false; /* then metal */
    r = decide_ok(&v, "auto", NULL);
    cr_assert_eq(r.backend, SIPP_BACKEND_METAL, "got %s", sipp_backend_name(r.backend));
    cr_assert_eq(r.device, metal);

    v.compiled[SIPP_BACKEND_METAL] = false; /* then vulkan */
    r = decide_ok(&v, "auto", NULL);
    cr_assert_eq(r.backend, SIPP_BACKEND_VULKAN, "got %s", sipp_backend_name(r.backend));

    v.compiled[SIPP_BACKEND_VULKAN] = false; /* then webgpu */
    r = decide_ok(&v, "auto", NULL);
    cr_assert_eq(r.backend, SIPP_BACKEND_WEBGPU, "got %s", sipp_backend_name(r.backend));

    v.compiled[SIPP_BACKEND_WEBGPU] = false; /* then cpu */
    r = decide_ok(&v, "auto", NULL);
    cr_assert_eq(r.backend, SIPP_BACKEND_CPU, "got %s", sipp_backend_name(r.backend));
}

Test(policy, auto_skips_compiled_backend_without_device) {
    sipp_host_view v = cpu_host();
    compile(&v, SIPP_BACKEND_CUDA); /* compiled, but no CUDA device */
    compile(&v, SIPP_BACKEND_VULKAN);
    int vk = add_device(&v, SIPP_BACKEND_VULKAN, "Vulkan0", "AMD Radeon RX 7900 XTX (RADV NAVI31)");
    sipp_policy_result r = decide_ok(&v, "auto", NULL);
    cr_assert_eq(r.backend, SIPP_BACKEND_VULKAN);
    cr_assert_eq(r.device, vk);
}

Test(policy, auto_skips_device_of_uncompiled_backend) {
    sipp_host_view v = cpu_host();
    add_device(&v, SIPP_BACKEND_CUDA, "CUDA0", "NVIDIA H200"); /* a device, but not compiled */
    sipp_policy_result r = decide_ok(&v, "auto", NULL);
    cr_assert_eq(r.backend, SIPP_BACKEND_CPU);
}

Test(policy, auto_never_picks_software_device) {
    sipp_host_view v = cpu_host();
    compile(&v, SIPP_BACKEND_VULKAN);
    add_device(&v, SIPP_BACKEND_VULKAN, "Vulkan0", LAVAPIPE);
    sipp_policy_result r = decide_ok(&v, "auto", NULL);
    cr_assert_eq(r.backend, SIPP_BACKEND_CPU,
                 "lavapipe is slower than the CPU backend; auto must not pick it");
    assert_contains(r.reason, "software");
}

Test(policy, auto_never_picks_software_device_of_any_backend) {
    sipp_host_view v = cpu_host();
    compile(&v, SIPP_BACKEND_VULKAN);
    compile(&v, SIPP_BACKEND_WEBGPU);
    add_device(&v, SIPP_BACKEND_VULKAN, "Vulkan0", "llvmpipe (LLVM 19.1.7, 256 bits)");
    add_device(&v, SIPP_BACKEND_WEBGPU, "WebGPU0", "SwiftShader Device (Subzero)");
    sipp_policy_result r = decide_ok(&v, "auto", NULL);
    cr_assert_eq(r.backend, SIPP_BACKEND_CPU);
    assert_contains(r.reason, "software");
}

Test(policy, auto_takes_hardware_device_beside_a_software_one) {
    sipp_host_view v = cpu_host();
    compile(&v, SIPP_BACKEND_VULKAN);
    add_device(&v, SIPP_BACKEND_VULKAN, "Vulkan0", LAVAPIPE);
    int hw = add_device(&v, SIPP_BACKEND_VULKAN, "Vulkan1", "NVIDIA GeForce RTX 4090");
    sipp_policy_result r = decide_ok(&v, "auto", NULL);
    cr_assert_eq(r.backend, SIPP_BACKEND_VULKAN);
    cr_assert_eq(r.device, hw, "the hardware device, not lavapipe");
}

Test(policy, auto_software_first_in_order_then_hardware_later) {
    /* vulkan has only lavapipe; webgpu (later in the order) has real hardware: webgpu wins. */
    sipp_host_view v = cpu_host();
    compile(&v, SIPP_BACKEND_VULKAN);
    compile(&v, SIPP_BACKEND_WEBGPU);
    add_device(&v, SIPP_BACKEND_VULKAN, "Vulkan0", LAVAPIPE);
    int hw = add_device(&v, SIPP_BACKEND_WEBGPU, "WebGPU0", "AMD Radeon Pro W7900");
    sipp_policy_result r = decide_ok(&v, "auto", NULL);
    cr_assert_eq(r.backend, SIPP_BACKEND_WEBGPU);
    cr_assert_eq(r.device, hw);
}

Test(policy, auto_ignores_backends_outside_the_order) {
    sipp_host_view v = cpu_host();
    compile(&v, SIPP_BACKEND_RPC);
    add_device(&v, SIPP_BACKEND_RPC, "RPC[10.0.0.2:50052]", "remote NVIDIA H200");
    sipp_policy_result r = decide_ok(&v, "auto", NULL);
    cr_assert_eq(r.backend, SIPP_BACKEND_CPU, "rpc is not in the default order");
}

Test(policy, empty_request_means_auto) {
    sipp_host_view v = cpu_host();
    compile(&v, SIPP_BACKEND_CUDA);
    add_device(&v, SIPP_BACKEND_CUDA, "CUDA0", "NVIDIA H200");
    cr_assert_eq(decide_ok(&v, NULL, NULL).backend, SIPP_BACKEND_CUDA);
    cr_assert_eq(decide_ok(&v, "", NULL).backend, SIPP_BACKEND_CUDA);
}

/* ---- the order --------------------------------------------------------------------------------- */

static sipp_host_view cuda_and_vulkan_host(int *cuda, int *vk) {
    sipp_host_view v = cpu_host();
    compile(&v, SIPP_BACKEND_CUDA);
    compile(&v, SIPP_BACKEND_VULKAN);
    *cuda = add_device(&v, SIPP_BACKEND_CUDA, "CUDA0", "NVIDIA H200");
    *vk = add_device(&v, SIPP_BACKEND_VULKAN, "Vulkan0", "NVIDIA H200");
    return v;
}

Test(policy, custom_order_argument) {
    int cuda, vk;
    sipp_host_view v = cuda_and_vulkan_host(&cuda, &vk);
    sipp_policy_result r = decide_ok(&v, "auto", "vulkan,cuda");
    cr_assert_eq(r.backend, SIPP_BACKEND_VULKAN);
    cr_assert_eq(r.device, vk);
    r = decide_ok(&v, "auto", "cuda,vulkan");
    cr_assert_eq(r.backend, SIPP_BACKEND_CUDA);
    cr_assert_eq(r.device, cuda);
    r = decide_ok(&v, "auto", "vulkan, cuda"); /* a space after the comma */
    cr_assert_eq(r.backend, SIPP_BACKEND_VULKAN);
    r = decide_ok(&v, "auto", "metal,webgpu"); /* none of these usable */
    cr_assert_eq(r.backend, SIPP_BACKEND_CPU);
}

Test(policy, cpu_in_the_order_ends_the_search) {
    int cuda, vk;
    sipp_host_view v = cuda_and_vulkan_host(&cuda, &vk);
    cr_assert_eq(decide_ok(&v, "auto", "cpu,cuda").backend, SIPP_BACKEND_CPU);
}

Test(policy, order_from_environment) {
    int cuda, vk;
    sipp_host_view v = cuda_and_vulkan_host(&cuda, &vk);
    cr_assert_eq(setenv("SIPP_BACKEND_ORDER", "vulkan,cuda", 1), 0);
    cr_assert_eq(decide_ok(&v, "auto", NULL).backend, SIPP_BACKEND_VULKAN, "SIPP_BACKEND_ORDER=vulkan,cuda");
    cr_assert_eq(decide_ok(&v, "auto", "").backend, SIPP_BACKEND_VULKAN,
                 "an empty order argument means unset");
    cr_assert_eq(decide_ok(&v, "auto", "cuda").backend, SIPP_BACKEND_CUDA,
                 "an order argument wins over the env");
    cr_assert_eq(decide_ok(&v, "cuda", NULL).backend, SIPP_BACKEND_CUDA,
                 "an explicit backend wins over the env");
    cr_assert_eq(unsetenv("SIPP_BACKEND_ORDER"), 0);
    cr_assert_eq(decide_ok(&v, "auto", NULL).backend, SIPP_BACKEND_CUDA, "back to the default order");
}

Test(policy, bad_order_names_rejected) {
    int cuda, vk;
    sipp_host_view v = cuda_and_vulkan_host(&cuda, &vk);
    const char *msg = decide_fail(&v, "auto", "nvidia", SIPP_ERR_INVALID_ARGUMENT);
    assert_contains(msg, "nvidia");
    msg = decide_fail(&v, "auto", "bogus,vulkan", SIPP_ERR_INVALID_ARGUMENT);
    assert_contains(msg, "bogus");
    decide_fail(&v, "auto", "auto", SIPP_ERR_INVALID_ARGUMENT);
    decide_fail(&v, "auto", "all", SIPP_ERR_INVALID_ARGUMENT);
}

/* The whole order is checked, not only the part walked before a usable backend: otherwise a typo in
 * a config passes on a machine with a CUDA GPU and fails on one without. */
Test(policy, bad_order_name_after_usable_backend_rejected) {
    int cuda, vk;
    sipp_host_view v = cuda_and_vulkan_host(&cuda, &vk);
    const char *msg = decide_fail(&v, "auto", "vulkan,bogus", SIPP_ERR_INVALID_ARGUMENT);
    assert_contains(msg, "bogus");
    decide_fail(&v, "auto", "cuda,vulkn", SIPP_ERR_INVALID_ARGUMENT);
    decide_fail(&v, "auto", "cpu,cdua", SIPP_ERR_INVALID_ARGUMENT);
}

Test(policy, bad_order_in_environment_rejected) {
    int cuda, vk;
    sipp_host_view v = cuda_and_vulkan_host(&cuda, &vk);
    cr_assert_eq(setenv("SIPP_BACKEND_ORDER", "vulkan;cuda", 1), 0);
    const char *msg = decide_fail(&v, "auto", NULL, SIPP_ERR_INVALID_ARGUMENT);
    assert_contains(msg, "vulkan;cuda");
    cr_assert_eq(decide_ok(&v, "cpu", NULL).backend, SIPP_BACKEND_CPU,
                 "explicit cpu does not read the order");
}

Test(policy, long_reason_stays_in_its_buffer) {
    /* Every GPU backend passed over with a long software description: the reason is cut, not overrun. */
    char desc[128];
    memset(desc, 'x', sizeof desc - 1);
    desc[sizeof desc - 1] = '\0';
    memcpy(desc, "llvmpipe ", 9);
    sipp_host_view v = cpu_host();
    static const sipp_backend_id ids[] = {SIPP_BACKEND_CUDA, SIPP_BACKEND_METAL, SIPP_BACKEND_VULKAN,
                                          SIPP_BACKEND_WEBGPU};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        compile(&v, ids[i]);
        add_device(&v, ids[i], "Dev", desc);
    }
    sipp_policy_result r = decide_ok(&v, "auto", NULL);
    cr_assert_eq(r.backend, SIPP_BACKEND_CPU);
}

/* ---- names ------------------------------------------------------------------------------------- */

Test(names, every_name_parses_to_its_id) {
    for (int i = 0; i < SIPP_BACKEND_COUNT; i++) {
        sipp_backend_id id = SIPP_BACKEND_COUNT;
        const char *name = sipp_backend_name((sipp_backend_id)i);
        cr_assert_eq(sipp_backend_parse(name, &id, NULL), SIPP_OK, "'%s'", name);
        cr_assert_eq(id, (sipp_backend_id)i, "'%s'", name);
    }
    static const char *const expected[] = {"auto", "cpu", "cuda", "metal", "vulkan", "webgpu", "rpc"};
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++) {
        sipp_backend_id id;
        cr_assert_eq(sipp_backend_parse(expected[i], &id, NULL), SIPP_OK, "'%s' is a documented name",
                     expected[i]);
        cr_assert_str_eq(sipp_backend_name(id), expected[i]);
        char err[SIPP_ERROR_SIZE];
        cr_assert_eq(sipp_backend_check_name(expected[i], err), SIPP_OK);
    }
}

Test(names, all_is_a_build_selector) {
    sipp_backend_id id;
    char err[SIPP_ERROR_SIZE] = "";
    cr_assert_eq(sipp_backend_parse("all", &id, err), SIPP_ERR_INVALID_ARGUMENT);
    assert_contains(err, "build selector");

    sipp_host_view v = cpu_host();
    const char *msg = decide_fail(&v, "all", NULL, SIPP_ERR_INVALID_ARGUMENT);
    assert_contains(msg, "build selector");
}

Test(names, unknown_name_lists_valid_names) {
    static const char *const bad[] = {"vulkann", "gpu", "opencl", "cpu ", "x"};
    static const char *const names[] = {"auto", "cpu", "cuda", "metal", "vulkan", "webgpu", "rpc"};
    sipp_host_view v = cpu_host();
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sipp_backend_id id;
        char err[SIPP_ERROR_SIZE] = "";
        cr_assert_eq(sipp_backend_parse(bad[i], &id, err), SIPP_ERR_INVALID_ARGUMENT, "'%s'", bad[i]);
        assert_contains(err, bad[i]);
        for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
            assert_contains(err, names[k]);
        const char *msg = decide_fail(&v, bad[i], NULL, SIPP_ERR_INVALID_ARGUMENT);
        assert_contains(msg, bad[i]);
        cr_assert_eq(sipp_backend_check_name(bad[i], NULL), SIPP_ERR_INVALID_ARGUMENT);
    }
}

Test(names, ggml_names_map_both_ways) {
    for (int i = 1; i < SIPP_BACKEND_COUNT; i++) {
        const char *g = sipp_backend_ggml_name((sipp_backend_id)i);
        cr_assert_not_null(g);
        cr_assert_eq(sipp_backend_from_ggml(g), (sipp_backend_id)i, "'%s'", g);
    }
    cr_assert_null(sipp_backend_ggml_name(SIPP_BACKEND_AUTO));
    cr_assert_eq(sipp_backend_from_ggml("BLAS"), SIPP_BACKEND_COUNT, "a ggml backend sipp has no name for");
    cr_assert_eq(sipp_backend_from_ggml(NULL), SIPP_BACKEND_COUNT);
    cr_assert_eq(sipp_backend_from_ggml("Vulkan"), SIPP_BACKEND_VULKAN);
    cr_assert_eq(sipp_backend_from_ggml("CPU"), SIPP_BACKEND_CPU);
}

/* ---- software devices -------------------------------------------------------------------------- */

Test(software, renderers_recognised) {
    cr_assert(sipp_device_is_software("llvmpipe (LLVM 15.0.6, 256 bits)"));
    cr_assert(sipp_device_is_software("lavapipe"));
    cr_assert(sipp_device_is_software("LLVMPIPE (LLVM 19.1.7, 256 bits)"));
    cr_assert(sipp_device_is_software("SwiftShader Device (Subzero)"));
    cr_assert(sipp_device_is_software("SwiftShader Device (LLVM 10.0.0)"));
}

Test(software, hardware_not_flagged) {
    cr_assert_not(sipp_device_is_software("NVIDIA GeForce RTX 4090"));
    cr_assert_not(sipp_device_is_software("NVIDIA H200"));
    cr_assert_not(sipp_device_is_software("AMD Radeon RX 7900 XTX (RADV NAVI31)"));
    cr_assert_not(sipp_device_is_software("Intel(R) UHD Graphics 630 (CFL GT2)"));
    cr_assert_not(sipp_device_is_software("Apple M2 Max"));
    cr_assert_not(sipp_device_is_software(""));
    cr_assert_not(sipp_device_is_software(NULL));
}
