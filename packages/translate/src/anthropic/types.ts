/**
 * The subset of the Anthropic Messages API this package reads and writes.
 * Field names and shapes follow https://docs.anthropic.com/en/api/messages and the
 * streaming grammar at https://docs.anthropic.com/en/docs/build-with-claude/streaming.
 * Inputs arrive as parsed JSON, so the translators still check shapes at run time.
 */

// ---------------------------------------------------------------- request

export interface AnthropicCacheControl {
  type: 'ephemeral';
  ttl?: '5m' | '1h';
}

export interface AnthropicTextBlockParam {
  type: 'text';
  text: string;
  cache_control?: AnthropicCacheControl | null;
  citations?: unknown[] | null;
}

export type AnthropicImageMediaType = 'image/jpeg' | 'image/png' | 'image/gif' | 'image/webp';

export interface AnthropicBase64ImageSource {
  type: 'base64';
  media_type: AnthropicImageMediaType;
  data: string;
}

export interface AnthropicUrlImageSource {
  type: 'url';
  url: string;
}

export interface AnthropicImageBlockParam {
  type: 'image';
  source: AnthropicBase64ImageSource | AnthropicUrlImageSource;
  cache_control?: AnthropicCacheControl | null;
}

export type AnthropicDocumentSource =
  | { type: 'base64'; media_type: 'application/pdf'; data: string }
  | { type: 'text'; media_type: 'text/plain'; data: string }
  | { type: 'url'; url: string }
  | { type: 'content'; content: string | unknown[] };

export interface AnthropicDocumentBlockParam {
  type: 'document';
  source: AnthropicDocumentSource;
  title?: string | null;
  context?: string | null;
  citations?: { enabled?: boolean } | null;
  cache_control?: AnthropicCacheControl | null;
}

export interface AnthropicToolUseBlockParam {
  type: 'tool_use';
  id: string;
  name: string;
  input: unknown;
  cache_control?: AnthropicCacheControl | null;
}

export interface AnthropicToolResultBlockParam {
  type: 'tool_result';
  tool_use_id: string;
  content?: string | Array<AnthropicTextBlockParam | AnthropicImageBlockParam | AnthropicDocumentBlockParam>;
  is_error?: boolean;
  cache_control?: AnthropicCacheControl | null;
}

export interface AnthropicThinkingBlockParam {
  type: 'thinking';
  thinking: string;
  signature: string;
}

export interface AnthropicRedactedThinkingBlockParam {
  type: 'redacted_thinking';
  data: string;
}

export type AnthropicContentBlockParam =
  | AnthropicTextBlockParam
  | AnthropicImageBlockParam
  | AnthropicDocumentBlockParam
  | AnthropicToolUseBlockParam
  | AnthropicToolResultBlockParam
  | AnthropicThinkingBlockParam
  | AnthropicRedactedThinkingBlockParam;

export interface AnthropicMessageParam {
  role: 'user' | 'assistant';
  content: string | AnthropicContentBlockParam[];
}

export interface AnthropicInputSchema {
  type: 'object';
  properties?: unknown;
  required?: string[] | null;
  [key: string]: unknown;
}

/** A client ("custom") tool. Server tools (web search, bash, ...) have a versioned `type` and no input_schema. */
export interface AnthropicTool {
  name: string;
  description?: string;
  input_schema: AnthropicInputSchema;
  type?: 'custom' | null;
  strict?: boolean;
  cache_control?: AnthropicCacheControl | null;
}

export interface AnthropicServerTool {
  type: string;
  name: string;
  [key: string]: unknown;
}

export type AnthropicToolChoice =
  | { type: 'auto'; disable_parallel_tool_use?: boolean }
  | { type: 'any'; disable_parallel_tool_use?: boolean }
  | { type: 'tool'; name: string; disable_parallel_tool_use?: boolean }
  | { type: 'none' };

export type AnthropicThinkingConfig =
  | { type: 'enabled'; budget_tokens: number }
  | { type: 'disabled' }
  | { type: 'adaptive' };

export interface AnthropicOutputConfig {
  effort?: 'low' | 'medium' | 'high' | 'xhigh' | 'max' | null;
  format?: { type: 'json_schema'; schema: Record<string, unknown> } | null;
}

export interface AnthropicMessagesRequest {
  model: string;
  messages: AnthropicMessageParam[];
  max_tokens: number;
  system?: string | AnthropicTextBlockParam[];
  stop_sequences?: string[];
  stream?: boolean;
  temperature?: number;
  top_p?: number;
  top_k?: number;
  tools?: Array<AnthropicTool | AnthropicServerTool>;
  tool_choice?: AnthropicToolChoice;
  metadata?: { user_id?: string | null };
  thinking?: AnthropicThinkingConfig;
  output_config?: AnthropicOutputConfig;
  service_tier?: 'auto' | 'standard_only';
  container?: unknown;
  mcp_servers?: unknown[];
  context_management?: unknown;
}

// ---------------------------------------------------------------- response

export interface AnthropicTextBlock {
  type: 'text';
  text: string;
  citations?: unknown[] | null;
}

export interface AnthropicToolUseBlock {
  type: 'tool_use';
  id: string;
  name: string;
  input: unknown;
}

export interface AnthropicThinkingBlock {
  type: 'thinking';
  thinking: string;
  signature: string;
}

export interface AnthropicRedactedThinkingBlock {
  type: 'redacted_thinking';
  data: string;
}

/** Blocks of a response. Server-tool blocks (server_tool_use, web_search_tool_result, ...) may also occur and are skipped. */
export type AnthropicContentBlock =
  | AnthropicTextBlock
  | AnthropicToolUseBlock
  | AnthropicThinkingBlock
  | AnthropicRedactedThinkingBlock;

export type AnthropicStopReason =
  | 'end_turn'
  | 'max_tokens'
  | 'stop_sequence'
  | 'tool_use'
  | 'pause_turn'
  | 'refusal'
  | 'model_context_window_exceeded';

export interface AnthropicUsage {
  input_tokens: number;
  output_tokens: number;
  cache_creation_input_tokens?: number | null;
  cache_read_input_tokens?: number | null;
}

export interface AnthropicMessage {
  id: string;
  type: 'message';
  role: 'assistant';
  model: string;
  content: AnthropicContentBlock[];
  stop_reason: AnthropicStopReason | null;
  stop_sequence: string | null;
  usage: AnthropicUsage;
}

// ---------------------------------------------------------------- stream

export interface AnthropicMessageStartEvent {
  type: 'message_start';
  message: AnthropicMessage;
}

export interface AnthropicContentBlockStartEvent {
  type: 'content_block_start';
  index: number;
  content_block: AnthropicContentBlock;
}

export type AnthropicContentDelta =
  | { type: 'text_delta'; text: string }
  | { type: 'input_json_delta'; partial_json: string }
  | { type: 'thinking_delta'; thinking: string }
  | { type: 'signature_delta'; signature: string }
  | { type: 'citations_delta'; citation: unknown };

export interface AnthropicContentBlockDeltaEvent {
  type: 'content_block_delta';
  index: number;
  delta: AnthropicContentDelta;
}

export interface AnthropicContentBlockStopEvent {
  type: 'content_block_stop';
  index: number;
}

export interface AnthropicMessageDeltaUsage {
  output_tokens: number;
  input_tokens?: number | null;
  cache_creation_input_tokens?: number | null;
  cache_read_input_tokens?: number | null;
}

export interface AnthropicMessageDeltaEvent {
  type: 'message_delta';
  delta: { stop_reason: AnthropicStopReason | null; stop_sequence: string | null };
  usage: AnthropicMessageDeltaUsage;
}

export interface AnthropicMessageStopEvent {
  type: 'message_stop';
}

export interface AnthropicPingEvent {
  type: 'ping';
}

export interface AnthropicErrorEvent {
  type: 'error';
  error: { type: string; message: string };
}

export type AnthropicStreamEvent =
  | AnthropicMessageStartEvent
  | AnthropicContentBlockStartEvent
  | AnthropicContentBlockDeltaEvent
  | AnthropicContentBlockStopEvent
  | AnthropicMessageDeltaEvent
  | AnthropicMessageStopEvent
  | AnthropicPingEvent
  | AnthropicErrorEvent;

// ---------------------------------------------------------------- error

export type AnthropicErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'permission_error'
  | 'not_found_error'
  | 'request_too_large'
  | 'rate_limit_error'
  | 'api_error'
  | 'overloaded_error';

export interface AnthropicErrorBody {
  type: 'error';
  error: { type: AnthropicErrorType; message: string };
}
