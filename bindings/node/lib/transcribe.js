'use strict';
/**
 * Speech to text through libsipp (sipp.h's speech section), with a whisper.cpp model:
 *
 *   const { speech } = require('sipp');
 *   const r = await speech.transcribe('ggml-tiny.bin', 'clip.mp3');            // {text, language, segments, ...}
 *   const srt = await speech.transcribe('ggml-tiny.bin', buffer, { format: 'srt', language: 'de' });
 *
 * `audio` is a path or a Buffer of a WAV, MP3 or FLAC file (any rate from 8 to 192 kHz, any channels).
 * Decoding uses whisper-cli's defaults (beam 5, best of 5, the temperature fallback), so the transcript
 * is whisper-cli's for the same clip, language and threads. format 'verbose_json' (the default) and
 * 'json' resolve to objects, 'text', 'srt' and 'vtt' to strings. The model is loaded, used and freed
 * on libuv's thread pool; errors are SippErrors with libsipp's status name as code ('invalid_argument'
 * for audio that is not audio, a truncated or empty clip, an unknown language).
 */
const fs = require('fs');
const native = require('./native');
const { toSippError, invalid } = require('./errors');

const OPTIONS = ['language', 'translate', 'format', 'threads', 'backend'];
const FORMATS = ['json', 'text', 'verbose_json', 'srt', 'vtt'];

async function transcribe(model, audio, options = {}) {
  const { language = null, translate = false, format = 'verbose_json', threads = 0, backend = 'auto', ...rest } =
    options || {};
  const extra = Object.keys(rest);
  if (extra.length) throw invalid(`unknown transcribe option '${extra[0]}' (known: ${OPTIONS.join(', ')})`);
  if (typeof model !== 'string') throw invalid('transcribe needs a model path');
  if (!FORMATS.includes(format)) throw invalid(`format '${format}': expected one of ${FORMATS.join(', ')}`);
  let where = 'the audio';
  let bytes = audio;
  if (typeof audio === 'string') {
    where = audio;
    try {
      bytes = await fs.promises.readFile(audio);
    } catch (e) {
      throw toSippError(Object.assign(new Error(`cannot read '${audio}': ${e.message}`), { code: 'not_found' }));
    }
  }
  if (!Buffer.isBuffer(bytes)) throw invalid('audio must be a path or a Buffer');
  let addon;
  try {
    addon = native.load();
    const out = await addon.transcribe(model, bytes, where, language, !!translate, format, threads | 0, backend);
    return format === 'json' || format === 'verbose_json' ? JSON.parse(out) : out;
  } catch (e) {
    throw toSippError(e);
  }
}

module.exports = { transcribe };
