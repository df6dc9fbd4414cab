// Types of the client rules both packages share (client.js, errors.js, options.js, query.js,
// gateway.js): the browser package's index.d.ts and the Node binding's bindings/node/index.d.ts
// re-export these and add their own local endpoint, response and client.

/** libsipp's status names, or 'gateway' for an HTTP failure of a gateway endpoint. */
export type ErrorCode =
  | 'invalid_argument' | 'not_found' | 'io_error' | 'model_error' | 'backend_error' | 'context_full' | 'busy'
  | 'cancelled' | 'timeout' | 'no_memory' | 'closed' | 'internal_error' | 'gateway';

export class SippError extends Error {
  code: ErrorCode;
  /** Gateway errors: the HTTP status, or null when the gateway could not be reached. */
  httpStatus?: number | null;
  gatewayCode?: string | null;
}

/** A sipp gateway (`sipp serve`): its target given as target or model (one of them), or the only one it serves. */
export interface GatewaySpec { kind: 'gateway'; baseUrl: string; target?: string; model?: string; token?: string }

export interface BackendDecision { backend: string; reason: string; devices: string; gpuLayers: number }

/** What every endpoint has; a package's own endpoints add to it. */
export interface EndpointBase {
  readonly name: string;
  readonly kind: 'local' | 'gateway';
  readonly backend: BackendDecision;
  readonly info: Record<string, unknown>;
  readonly closed: boolean;
}

export interface GenerationOptions {
  endpoint?: EndpointBase | string;
  signal?: AbortSignal;
  maxTokens?: number;
  temperature?: number;
  topK?: number;
  topP?: number;
  minP?: number;
  repeatPenalty?: number;
  seed?: number;
  stop?: string | string[];
  contextKey?: string;
  chatTemplate?: string;
  ignoreEos?: boolean;
  timeoutMs?: number;
  /**
   * Chats: OpenAI's and llama.cpp's fields. They need llama.cpp's chat library: the Node binding's
   * endpoints pass them on (libsipp, or the gateway, checks them); the browser package refuses them
   * by name (its runtime has no chat library, its gateway endpoint reads only the stream's text).
   */
  tools?: unknown[];
  toolChoice?: unknown;
  parallelToolCalls?: boolean;
  responseFormat?: unknown;
  grammar?: string;
  jsonSchema?: unknown;
  reasoningFormat?: string;
  chatTemplateKwargs?: Record<string, unknown>;
  thinkingBudgetTokens?: number;
}

export interface EmbedOptions { endpoint?: EndpointBase | string; normalize?: boolean }

export interface Usage { promptTokens: number; completionTokens: number; totalTokens: number; cachedTokens?: number }

export interface ToolCall { id: string; type: 'function'; function: { name: string; arguments: string } }

/**
 * A message: { role, content }; an assistant message may carry tool_calls (content null), a tool
 * message a tool_call_id (both need llama.cpp's chat library: the browser runtime refuses them).
 */
export interface Message {
  role: string;
  content: string | null;
  tool_calls?: ToolCall[];
  tool_call_id?: string;
  [key: string]: unknown;
}

/** A chat's typed piece (query.deltas); a text-only endpoint's pieces are all 'content'. */
export type Delta =
  | { type: 'content'; text: string }
  | { type: 'reasoning'; text: string }
  | { type: 'toolCall'; index: number; id?: string; name?: string; arguments: string };

/** What query() and chat() return at once; iterate tokens or deltas, once. */
export interface QueryOf<R> {
  response: Promise<R>;
  tokens: AsyncIterable<string>;
  deltas: AsyncIterable<Delta>;
  cancel(): void;
}
