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
