/*
 * miniaudio_options.h: miniaudio's header with the options libmtmd's helper uses (no encoding, no
 * device I/O, no resource manager, node graph, engine or generation), for miniaudio.c and its user.
 */
#ifndef SIPP_MODEL_MINIAUDIO_OPTIONS_H
#define SIPP_MODEL_MINIAUDIO_OPTIONS_H

#define MA_NO_ENCODING
#define MA_NO_DEVICE_IO
#define MA_NO_RESOURCE_MANAGER
#define MA_NO_NODE_GRAPH
#define MA_NO_ENGINE
#define MA_NO_GENERATION
#include <miniaudio/miniaudio.h>

#endif
