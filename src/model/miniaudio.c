/*
 * miniaudio.c: the pinned llama.cpp's vendored miniaudio (vendor/miniaudio/miniaudio.h), compiled
 * once into libsipp with the options libmtmd's helper builds it with (tools/mtmd/mtmd-helper.cpp):
 * decoding only, no devices, no engine. audio_decode.c is its one user. Built with the vendor
 * directory on the include path and its own warnings off (Makefile): it is llama.cpp's dependency,
 * not sipp's code.
 */
#define MINIAUDIO_IMPLEMENTATION
#include "model/miniaudio_options.h"
