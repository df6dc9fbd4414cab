// Types of sipp's Node.js binding (lib/index.js). See docs/bindings.md. The types of the client
// rules it shares with the browser package are bindings/web/client.d.ts's, re-exported here.
import type {
  BackendDecision, EndpointBase, GatewaySpec, GenerationOptions, EmbedOptions, Usage, ToolCall, Message, QueryOf,
} from '../web/client.js';
export { SippError } from '../web/client.js';
export type {
  ErrorCode, GatewaySpec, BackendDecision, EndpointBase, GenerationOptions, EmbedOptions, Usage, ToolCall, Message, Delta,
  QueryOf,
} from '../web/client.js';

export type BackendName = 'auto' | 'cpu' | 'vulkan' | 'cuda' | 'metal';

export interface LocalOptions {
  backend?: BackendName;
  /** Flash attention: 'auto' (default: llama.cpp's choice, off for an explicit 'cpu'), 'on', 'off'. */
  flashAttn?: 'auto' | 'on' | 'off';
  ctxSize?: number;
  parallel?: number;
  threads?: number;
  gpuLayers?: number;
  batchSize?: number;
  maxQueued?: number;
  embeddings?: boolean;
  /** Speculative decoding (greedy requests only): 'none' (default), 'ngram' (prompt lookup), or
   * 'draft' (the default when draftModel is given). */
  speculative?: 'none' | 'ngram' | 'draft';
  /** A draft model of the same vocabulary (checked at open), loaded beside the model. */
  draftModel?: string;
  /** Tokens proposed per step (default 8, at most 32), and the shortest proposal verified (default 1). */
  draftMax?: number;
  draftMin?: number;
  /** The draft stops at a token it gives less than this probability, in [0, 1) (default 0: never). */
  draftPMin?: number;
  /** 'auto' (default): a cost model the engine measures picks each step's draft length, 0 (a plain
   * step) where speculation would be slower; 'off': always propose up to draftMax. */
  draftCutoff?: 'auto' | 'off';
  /** The KV cache's key and value types: 'f16' (default), 'q8_0', 'q4_0'. A quantized V cache needs
   * flash attention (refused where the load has it off: flashAttn 'off', or backend 'cpu' without
   * flashAttn 'on'). */
  cacheTypeK?: 'f16' | 'q8_0' | 'q4_0';
  cacheTypeV?: 'f16' | 'q8_0' | 'q4_0';
  /** The model's multimodal projector (an mmproj-*.gguf file): chats may then carry images
   * ({type: 'image_url', image_url: {url: 'data:...;base64,...'}}) and audio (input_audio parts). */
  mmproj?: string;
  /** Run the projector on the GPU backend (default true; never under backend 'cpu'). */
  mmprojOffload?: boolean;
}

export interface LocalSpec { kind: 'local'; model: string; options?: LocalOptions }
export type Endpoint = EndpointBase;

export interface Stats {
  backend: string;
  promptTokens?: number;
  cachedTokens?: number;
  generatedTokens?: number;
  queueMs?: number;
  ttftMs?: number;
  prefillMs?: number;
  decodeMs?: number;
  prefillTokensPerS?: number;
  decodeTokensPerS?: number;
  totalMs?: number;
  /** Speculative decoding: tokens proposed, and of those the ones the model confirmed. */
  draftTokens?: number;
  acceptedTokens?: number;
  /** Steps that verified a proposal, and steps that draftCutoff 'auto' ran plain. */
  draftSteps?: number;
  cutoffSteps?: number;
  /** 'none', 'ngram', 'draft', 'draft cut off (plain was faster)', 'ngram cut off (plain was faster)',
   * 'off (repeat penalty)', 'off (grammar, thinking budget or logprobs)'. */
  speculation?: string;
  [key: string]: unknown;
}

export interface Response {
  text: string;
  /** 'tool_calls' when a chat's reply is tool calls. */
  finishReason: 'stop' | 'length' | 'cancelled' | 'tool_calls';
  usage: Usage;
  stats: Stats;
  endpoint: string;
  error?: string;
  /** A chat through llama.cpp's chat library (local, or a gateway's): the reply's tool calls and reasoning. */
  toolCalls?: ToolCall[];
  reasoning?: string;
}

export type Query = QueryOf<Response>;

export class SippClient {
  constructor();
  add(name: string, spec: LocalSpec | GatewaySpec): Promise<Endpoint>;
  endpoint(which?: Endpoint | string): Endpoint;
  readonly endpoints: Record<string, Endpoint>;
  query(prompt: string, options?: GenerationOptions): Query;
  chat(messages: Message[], options?: GenerationOptions): Query;
  embed(input: string, options?: EmbedOptions): Promise<number[]>;
  embed(input: string[], options?: EmbedOptions): Promise<number[][]>;
  stats(endpoint?: Endpoint | string): Record<string, number | string>;
  remove(endpoint: Endpoint | string): Promise<void>;
  close(): Promise<void>;
  readonly closed: boolean;
}

export function backendSelection(): {
  backend: BackendName; artifact: string | null; backends: string[] | null; source: string;
  decision: BackendDecision | null;
};

export function runtimeInfo(): Promise<{
  artifact: string; version: string; llamaRelease: string; llamaCommit: string;
  selection: ReturnType<typeof backendSelection>;
}>;

export interface StoreFile { file: string; url: string; size: number; sha256: string | null }
export interface StoreModel {
  name: string; path: string; size: number; nFiles: number; source: string | null; pulledAt: string | null;
  verified: boolean; managed: boolean;
  /** what runs it: "llamacpp" (GGUF) or "whispercpp" (a whisper.cpp .bin) */
  recipe: 'llamacpp' | 'whispercpp';
  files: StoreFile[];
}
export interface PullProgress {
  fileIndex: number; nFiles: number; file: string; done: number; total: number; received: number;
  bytesPerS: number; etaS: number; fileDone: boolean; note: string | null;
}
export interface PullOptions {
  name?: string; sha256?: string; force?: boolean; retries?: number;
  /** Called several times a second; returning false stops the pull (code 'cancelled'). */
  onProgress?: (p: PullProgress) => boolean | void;
}
export interface PullResult {
  name: string; path: string; url: string; nFiles: number; size: number; received: number; verified: boolean;
  already: boolean; resumed: boolean; replaced: boolean; sha256: string; seconds: number;
}
export interface GgufTypeCount { type: string; nTensors: number; nParams: number; bytes: number }
export interface ModelFacts {
  path: string; architecture: string; generalName: string | null; fileType: string | null; ggufVersion: number;
  nFiles: number; fileSize: number; nParams: number; nTensors: number | null; nCtxTrain: number | null;
  nEmbd: number | null; nLayer: number | null; nHead: number | null; nHeadKv: number | null; nFf: number | null;
  nVocab: number | null; pooling: string | null; tokenizer: string | null; hasChatTemplate: boolean;
  tensorTypes: GgufTypeCount[]; sha256: string | null;
}
/** The local model store ($SIPP_MODELS_DIR). */
export declare const store: {
  list(options?: { dir?: string }): Promise<StoreModel[]>;
  info(nameOrPath: string, options?: { hash?: boolean }): Promise<ModelFacts>;
  pull(source: string, options?: PullOptions): Promise<PullResult>;
};
export interface SpeechOptions {
  /** 'flite' (the default: no model file) or a Qwen3-TTS / Pocket TTS backbone GGUF */
  model?: string; mmproj?: string; speaker?: string;
  /** flite: kal, kal16, slt, rms, awb */
  voice?: string; speed?: number; format?: 'wav' | 'pcm' | 'flac' | 'mp3' | 'opus'; seed?: number;
  sampleRate?: number; language?: string;
}
/** Speaks input; resolves to the encoded audio. */
export declare function speech(input: string, options?: SpeechOptions): Promise<Buffer>;
export declare namespace speech {
  /** The same audio as it is made: each sentence's encoded bytes as soon as it is spoken (a WAV's
   * sizes are placeholders). Leaving the loop early stops the speech. */
  function stream(input: string, options?: SpeechOptions): AsyncIterableIterator<Buffer>;
}
/** One segment of a verbose_json transcript. */
export interface TranscriptSegment {
  id: number; seek: number; start: number; end: number; text: string; tokens: number[];
  avg_logprob: number; no_speech_prob: number;
}
/** A verbose_json transcript (format 'json' gives only `text`). */
export interface Transcript {
  task: string; language: string; language_probability: number; duration: number; text: string;
  segments: TranscriptSegment[]; words?: { word: string; start: number; end: number; probability: number }[];
}
export interface TranscribeOptions {
  language?: string | null; translate?: boolean; format?: 'json' | 'text' | 'verbose_json' | 'srt' | 'vtt';
  threads?: number; backend?: string;
}
/** Speech to text with a whisper.cpp model (sipp.h's speech section). */
export declare function transcribe(model: string, audio: string | Buffer, options?: TranscribeOptions):
  Promise<Transcript | string>;
