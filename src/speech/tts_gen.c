/*
 * tts_gen.c: Qwen3-TTS and Pocket TTS through libmtmd's audio generation (see tts_gen.h).
 */
#include "speech/tts_gen.h"

#include "util/util.h"

struct sipp_tts_gen {
    int rate;
};

sipp_status sipp_tts_gen_load(const sipp_tts_params *params, sipp_tts_gen **out, char *err) {
    *out = NULL;
    return sipp_fail(err, SIPP_ERR_MODEL,
                     "'%s': speech from a GGUF pair (Qwen3-TTS, Pocket TTS) is not built yet; "
                     "use the model \"flite\"",
                     params->model);
}

void sipp_tts_gen_free(sipp_tts_gen *g) { (void)g; }
const char *sipp_tts_gen_pipeline(const sipp_tts_gen *g) { return "none"; }
int sipp_tts_gen_rate(const sipp_tts_gen *g) { return g->rate; }
uint64_t sipp_tts_gen_memory(const sipp_tts_gen *g) { return 0; }

sipp_status sipp_tts_gen_speak(sipp_tts_gen *g, const char *text, size_t len, const sipp_speak_options *o,
                               int16_t **out, size_t *n, char *err) {
    return sipp_fail(err, SIPP_ERR_MODEL, "speech from a GGUF pair is not built yet");
}
