// Types of sipp's browser package (index.js). See README.md beside this file. The types of the
// client rules it shares with the Node binding are client.d.ts's, re-exported here.
import { SippError as SharedSippError } from './client.js';
import type { EndpointBase, GatewaySpec, GenerationOptions, EmbedOptions, Usage, Message, QueryOf } from './client.js';
export type {
  ErrorCode, GatewaySpec, BackendDecision, EndpointBase, GenerationOptions, EmbedOptions, Usage, ToolCall, Message, Delta,
  QueryOf,
} from './client.js';

export type BrowserBackend = 'auto' | 'cpu' | 'webgpu';
export type Build = 'auto' | 'pthreads' | 'single';

export class SippError extends SharedSippError {
  /** backend 'webgpu': what the browser offers. */
  webgpu?: WebGpuProbe;
}

export interface ClientOptions {
  /** Where sipp-mt.js / sipp-st.js (make web) are; default build/web/ of this repository. */
  runtimeUrl?: string;
  /** worker.js; default the one beside index.js. */
  workerUrl?: string;
  /** 'auto' (default): pthreads when crossOriginIsolated, else single thread. */
  build?: Build;
  /** WebAssembly threads of the pthread build; default navigator.hardwareConcurrency. */
  threads?: number;
  /** llama.cpp's logging in the console; default 'quiet'. */
  logLevel?: 'quiet' | 'error' | 'warn' | 'info' | 'debug';
}

export interface LocalOptions {
  backend?: BrowserBackend;
  ctxSize?: number;
  /** The same as ctxSize, in the shape { context: { n_ctx } }. */
  runtime?: { context: { n_ctx: number } };
  parallel?: number;
  threads?: number;
  batchSize?: number;
  embeddings?: boolean;
}

export interface Progress { url: string; loaded: number; total: number | null }

export interface LocalSpec {
  kind: 'local';
  /** A URL (fetched once, then cached in OPFS by SHA-256), a File or a Blob. */
  source: string | Blob;
  /** Expected SHA-256 (hex) of a URL's bytes: checked while downloading; a cached copy is used without a request. */
  sha256?: string;
  /** Bearer token sent with the download (a gateway that serves model files). */
  token?: string;
  onProgress?: (p: Progress) => void;
  options?: LocalOptions;
}

export interface RuntimeInfo {
  build: 'pthreads' | 'single';
  variant: 'mt' | 'st';
  threads: number;
  reason: string;
  pthreads: boolean;
  version: string;
  llamaRelease: string;
  llamaCommit: string;
}

export interface Endpoint extends EndpointBase {
  readonly runtime?: { build: 'pthreads' | 'single'; threads: number; reason: string; chatLibrary: boolean };
  readonly source?: { cacheKey: string | null; fromCache: boolean };
}

export interface ChatCapabilities {
  /** Whether llama.cpp's chat library (Jinja templates, tools, schemas) is compiled in. */
  library: boolean;
  templates: string;
  tools: boolean;
  responseFormat: boolean;
  grammar: boolean;
  detail?: string;
}

export interface Timings {
  queueMs?: number;
  ttftMs?: number;
  prefillMs?: number;
  decodeMs?: number;
  prefillTokensPerS?: number;
  decodeTokensPerS?: number;
  totalMs?: number;
}

export interface Response {
  text: string;
  finishReason: 'stop' | 'length' | 'cancelled';
  usage: Usage;
  timings: Timings;
  /** What really ran: 'cpu' (WebAssembly) or 'gateway'. */
  backend: string;
  /** WebAssembly threads used; null for a gateway endpoint. */
  threads: number | null;
  build?: 'pthreads' | 'single';
  stats: Record<string, unknown>;
  endpoint: string;
  error?: string;
}

export type Query = QueryOf<Response>;

export interface WebGpuProbe { adapter: boolean; isFallbackAdapter: boolean | null; shaderF16: boolean; description: string | null }

export interface BackendsReport {
  runtime: RuntimeInfo;
  backends: Array<{ name: string; compiled: boolean; available: boolean; detail: string } & Partial<WebGpuProbe>>;
  auto: { backend: string; reason: string };
  chat: ChatCapabilities;
}

export interface CachedModel { key: string; size: number; url: string | null; name: string | null; added: string | null }

export class ModelCache {
  list(): Promise<CachedModel[]>;
  delete(key: string): Promise<boolean>;
  clear(): Promise<void>;
}

export class SippClient {
  constructor(options?: ClientOptions);
  readonly cache: ModelCache;
  runtime(): Promise<RuntimeInfo>;
  add(name: string, spec: LocalSpec | GatewaySpec): Promise<Endpoint>;
  endpoint(which?: Endpoint | string): Endpoint;
  readonly endpoints: Record<string, Endpoint>;
  query(prompt: string, options?: GenerationOptions): Query;
  chat(messages: Message[], options?: GenerationOptions): Query;
  embed(input: string, options?: EmbedOptions): Promise<number[]>;
  embed(input: string[], options?: EmbedOptions): Promise<number[][]>;
  backends(): Promise<BackendsReport>;
  stats(endpoint?: Endpoint | string): Record<string, number | string>;
  remove(endpoint: Endpoint | string): Promise<void>;
  close(): Promise<void>;
  readonly closed: boolean;
}
