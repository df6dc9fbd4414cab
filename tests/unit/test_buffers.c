/*
 * test_buffers.c: the backend buffer lines of llama.cpp's log (src/backend/buffers.c) counted by
 * place and kind, and lines that report no buffer left alone. The lines are the pinned llama.cpp's
 * own formats (llama-model.cpp, llama-kv-cache.cpp, llama-context.cpp).
 */
#include <criterion/criterion.h>
#include <string.h>

#include "backend/backend.h"

#define MIB (1024ull * 1024ull)

Test(buffers, cpu_load_and_context) {
    sipp_memory m;
    memset(&m, 0, sizeof m);
    cr_assert(sipp_buffers_parse("load_tensors:   CPU_Mapped model buffer size =    12.00 MiB\n", &m));
    cr_assert(sipp_buffers_parse("llama_kv_cache:        CPU KV buffer size =     4.00 MiB\n", &m));
    cr_assert(sipp_buffers_parse("llama_context:        CPU  output buffer size =     0.50 MiB\n", &m));
    cr_assert(sipp_buffers_parse("sched_reserve:        CPU compute buffer size =     2.50 MiB\n", &m));
    cr_assert_eq(m.host_bytes, 19 * MIB);
    cr_assert_eq(m.n_devices, 0);
    cr_assert_eq(m.weights_bytes, 12 * MIB);
    cr_assert_eq(m.kv_bytes, 4 * MIB);
    cr_assert_eq(m.compute_bytes, 3 * MIB);
    cr_assert_eq(sipp_memory_total(&m), 19 * MIB);
}

Test(buffers, gpu_places) {
    sipp_memory m;
    memset(&m, 0, sizeof m);
    cr_assert(sipp_buffers_parse("load_tensors:        CUDA0 model buffer size =   100.00 MiB\n", &m));
    cr_assert(sipp_buffers_parse("load_tensors:  CUDA0_Split model buffer size =    10.00 MiB\n", &m));
    cr_assert(sipp_buffers_parse("load_tensors:    CUDA_Host model buffer size =     1.00 MiB\n", &m));
    cr_assert(sipp_buffers_parse("load_tensors:      Vulkan1 model buffer size =     5.00 MiB\n", &m));
    cr_assert(sipp_buffers_parse("llama_kv_cache:      CUDA0 KV buffer size =     8.00 MiB\n", &m));
    cr_assert_eq(m.host_bytes, 1 * MIB);
    cr_assert_eq(m.n_devices, 2);
    cr_assert_str_eq(m.devices[0].name, "CUDA0");
    cr_assert_eq(m.devices[0].bytes, 118 * MIB);
    cr_assert_str_eq(m.devices[1].name, "Vulkan1");
    cr_assert_eq(m.devices[1].bytes, 5 * MIB);
    cr_assert_eq(m.weights_bytes, 116 * MIB);
    cr_assert_eq(m.kv_bytes, 8 * MIB);

    sipp_memory sum;
    memset(&sum, 0, sizeof sum);
    sipp_memory_merge(&sum, &m);
    sipp_memory_merge(&sum, &m);
    cr_assert_eq(sum.devices[0].bytes, 236 * MIB);
    cr_assert_eq(sum.weights_bytes, 232 * MIB);
    cr_assert_eq(sum.kv_bytes, 16 * MIB);
    cr_assert_eq(sipp_memory_total(&sum), 2 * sipp_memory_total(&m));
}

Test(buffers, other_lines_ignored) {
    sipp_memory m;
    memset(&m, 0, sizeof m);
    const char *lines[] = {
        "llama_context: n_ctx = 512\n",
        "load_tensors: offloaded 5/5 layers to GPU\n",
        "buffer size = 12 MiB\n",                 /* no function prefix */
        "x: CPU model buffer size = many MiB\n",  /* no number */
        "x: CPU model buffer size = -3.00 MiB\n", /* negative */
        "x: CPU model buffer size = 3.00 GiB\n",  /* not MiB */
        "x:  buffer size = 3.00 MiB\n",           /* no buffer type */
        "",
    };
    for (size_t i = 0; i < sizeof lines / sizeof *lines; i++)
        cr_assert_not(sipp_buffers_parse(lines[i], &m), "parsed '%s'", lines[i]);
    cr_assert_eq(sipp_memory_total(&m), 0);
}

/* An AMX host's q8_0/q4_0 weights sit in the CPU's "AMX" buffer type, whose name says nothing of the
 * CPU: where ggml says it is host memory, it is counted as host memory, not as a device "AMX". */
Test(buffers, cpu_extra_buffer_types_are_host_memory) {
    sipp_buft_place cpu = {.device = "CPU", .host = true};
    sipp_buft_place amx = {.device = "CPU", .layout = "AMX", .host = true};
    sipp_buft_place repack = {.device = "CPU", .layout = "REPACK", .host = true};
    sipp_buffers_learn_one("CPU", &cpu);
    sipp_buffers_learn_one("AMX", &amx);
    sipp_buffers_learn_one("CPU_REPACK", &repack);
    sipp_memory m;
    memset(&m, 0, sizeof m);
    cr_assert(sipp_buffers_parse("load_tensors:          AMX model buffer size =    18.00 MiB\n", &m));
    cr_assert(sipp_buffers_parse("load_tensors:   CPU_REPACK model buffer size =     2.00 MiB\n", &m));
    cr_assert(sipp_buffers_parse("load_tensors:   CPU_Mapped model buffer size =    20.00 MiB\n", &m));
    cr_assert_eq(m.n_devices, 0);
    cr_assert_eq(m.host_bytes, 40 * MIB);
    cr_assert_eq(m.weights_bytes, 40 * MIB);

    sipp_buft_place p;
    cr_assert(sipp_buft_place_of("CPU_Mapped", strlen("CPU_Mapped"), &p)); /* a known name + "_suffix" */
    cr_assert_str_eq(p.device, "CPU");
    cr_assert_str_eq(p.layout, "");
    cr_assert(sipp_buft_place_of("AMX", 3, &p));
    cr_assert_str_eq(p.layout, "AMX");
    cr_assert_not(sipp_buft_place_of("AMXY", 4, &p)); /* a prefix without '_' is another name */
}

/* A device's own memory stays the device's even when its name starts like a host one. */
Test(buffers, learned_device_memory) {
    sipp_buft_place vk = {.device = "Vulkan0", .host = false};
    sipp_buft_place vk_host = {.device = "CPU", .host = true};
    sipp_buffers_learn_one("Vulkan0", &vk);
    sipp_buffers_learn_one("Vulkan_Host", &vk_host);
    sipp_memory m;
    memset(&m, 0, sizeof m);
    cr_assert(sipp_buffers_parse("load_tensors:      Vulkan0 model buffer size =     5.00 MiB\n", &m));
    cr_assert(sipp_buffers_parse("load_tensors:  Vulkan_Host model buffer size =     1.00 MiB\n", &m));
    cr_assert_eq(m.n_devices, 1);
    cr_assert_str_eq(m.devices[0].name, "Vulkan0");
    cr_assert_eq(m.devices[0].bytes, 5 * MIB);
    cr_assert_eq(m.host_bytes, 1 * MIB);
}

/* What the loaded CPU module says of its own buffer types: the CPU's is host memory, and so is
 * every extra layout it offers (whichever this host's module has: REPACK, AMX, ...). */
Test(buffers, learned_from_ggml) {
    char err[SIPP_ERROR_SIZE];
    cr_assert_eq(sipp_runtime_init(NULL, err), SIPP_OK, "%s", err);
    sipp_buft_place p;
    cr_assert(sipp_buft_place_of("CPU", 3, &p));
    cr_assert(p.host);
    cr_assert_str_eq(p.device, "CPU");
    cr_assert_str_eq(p.layout, "");
    if (sipp_buft_place_of("CPU_REPACK", strlen("CPU_REPACK"), &p)) {
        cr_assert(p.host);
        cr_assert_str_eq(p.device, "CPU");
        cr_assert_str_eq(p.layout, "REPACK");
    }
    if (sipp_buft_place_of("AMX", 3, &p)) {
        cr_assert(p.host);
        cr_assert_str_eq(p.device, "CPU");
        cr_assert_str_eq(p.layout, "AMX");
    }
}
