/*
 * speech.h: the speech engine's insides, shared by its files (internal).
 *
 *   transcriber.c        a whisper model loaded on the backend the policy picks, its pool of whisper
 *                        states (one per clip transcribed at once) and the memory libwhisper reported
 *   transcribe.c         one clip: sipp's parameters as whisper_full_params, language detection, the
 *                        cancel flag and the segment callback, the transcript collected from the state
 *   transcript_format.c  a transcript rendered as json, text, verbose_json, srt or vtt (pure)
 *   whisper_bridge.cpp   libwhisper opened at run time, its throwing calls kept from C
 *   whisper_probe.c      sipp verify's view of a whisper model on one backend: a clip encoded, the
 *                        start-of-transcript prompt decoded, the logits after each token
 */
#ifndef SIPP_SPEECH_SPEECH_H
#define SIPP_SPEECH_SPEECH_H

#include <pthread.h>

#include "sipp.h"
#include "speech/whisper_bridge.h"

#define SIPP_WHISPER_RATE 16000 /* whisper's sample rate, Hz */

struct sipp_transcriber {
    const sipp_whisper_api *api;
    struct whisper_context *ctx;
    struct whisper_state **states;
    bool *busy; /* busy[i]: states[i] is transcribing */
    int n_states;
    int threads;
    pthread_mutex_t mu;
    pthread_cond_t freed;
    sipp_memory mem;
    char backend[16];
    char reason[256];
    char device[64]; /* the ggml device it runs on: "CPU", "Vulkan0" */
};

struct sipp_transcript {
    char *text;
    char language[16];
    float language_prob;
    double duration;
    sipp_transcript_segment *segments;
    int n_segments;
};

/* Takes a free state (waiting for one), and gives it back. [any thread] */
int sipp_transcriber_acquire(sipp_transcriber *t);
void sipp_transcriber_release(sipp_transcriber *t, int slot);

/* Fills segment i of the state's result into *seg, with its strings and arrays allocated (freed by
 * sipp_transcript_segment_clear). false when out of memory. */
bool sipp_transcript_segment_fill(const sipp_transcriber *t, struct whisper_state *state, int i, bool words,
                                  sipp_transcript_segment *seg);
void sipp_transcript_segment_clear(sipp_transcript_segment *seg);

#endif
