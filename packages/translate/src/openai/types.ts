/**
 * The subset of the OpenAI Chat Completions API this package reads and writes.
 * Field names and shapes follow https://platform.openai.com/docs/api-reference/chat.
 * Inputs arrive as parsed JSON, so the translators still check shapes at run time.
 */

// ---------------------------------------------------------------- request

export interface OpenAITextPart {
  type: 'text';
  text: string;
}

export interface OpenAIImagePart {
  type: 'image_url';
  image_url: { url: string; detail?: 'auto' | 'low' | 'high' };
}

export interface OpenAIInputAudioPart {
  type: 'input_audio';
  input_audio: { data: string; format: string };
}

export interface OpenAIFilePart {
  type: 'file';
  file: { file_data?: string; file_id?: string; filename?: string };
}

export interface OpenAIRefusalPart {
  type: 'refusal';
  refusal: string;
}

export type OpenAIUserContentPart = OpenAITextPart | OpenAIImagePart | OpenAIInputAudioPart | OpenAIFilePart;
export type OpenAIAssistantContentPart = OpenAITextPart | OpenAIRefusalPart;

export interface OpenAIToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

export interface OpenAISystemMessage {
  role: 'system';
  content: string | OpenAITextPart[];
  name?: string;
}

export interface OpenAIDeveloperMessage {
  role: 'developer';
  content: string | OpenAITextPart[];
  name?: string;
}

export interface OpenAIUserMessage {
  role: 'user';
  content: string | OpenAIUserContentPart[];
  name?: string;
}

export interface OpenAIAssistantMessage {
  role: 'assistant';
  content?: string | OpenAIAssistantContentPart[] | null;
  refusal?: string | null;
  tool_calls?: OpenAIToolCall[];
  /** Deprecated; rejected by the translator. */
  function_call?: { name: string; arguments: string } | null;
  audio?: { id: string } | null;
  name?: string;
}

export interface OpenAIToolMessage {
  role: 'tool';
  content: string | OpenAITextPart[];
  tool_call_id: string;
}

/** Deprecated; rejected by the translator. */
export interface OpenAIFunctionMessage {
  role: 'function';
  content: string | null;
  name: string;
}

export type OpenAIMessage =
  | OpenAISystemMessage
  | OpenAIDeveloperMessage
  | OpenAIUserMessage
  | OpenAIAssistantMessage
  | OpenAIToolMessage
  | OpenAIFunctionMessage;

export interface OpenAIFunctionDefinition {
  name: string;
  description?: string;
  parameters?: Record<string, unknown>;
  strict?: boolean | null;
}

export interface OpenAIFunctionTool {
  type: 'function';
  function: OpenAIFunctionDefinition;
}

export interface OpenAICustomTool {
  type: 'custom';
  custom: { name: string; description?: string; format?: unknown };
}

export type OpenAITool = OpenAIFunctionTool | OpenAICustomTool;

export type OpenAIToolChoice =
  | 'none'
  | 'auto'
  | 'required'
  | { type: 'function'; function: { name: string } }
  | { type: 'custom'; custom: { name: string } }
  | { type: 'allowed_tools'; allowed_tools: { mode: 'auto' | 'required'; tools: unknown[] } };

export type OpenAIResponseFormat =
  | { type: 'text' }
  | { type: 'json_object' }
  | {
      type: 'json_schema';
      json_schema: { name: string; description?: string; schema?: Record<string, unknown>; strict?: boolean | null };
    };

export type OpenAIReasoningEffort = 'none' | 'minimal' | 'low' | 'medium' | 'high' | 'xhigh';

export interface OpenAIStreamOptions {
  include_usage?: boolean;
  include_obfuscation?: boolean;
}

export interface OpenAIChatRequest {
  model: string;
  messages: OpenAIMessage[];
  max_tokens?: number | null;
  max_completion_tokens?: number | null;
  temperature?: number | null;
  top_p?: number | null;
  n?: number | null;
  stop?: string | string[] | null;
  stream?: boolean | null;
  stream_options?: OpenAIStreamOptions | null;
  tools?: OpenAITool[];
  tool_choice?: OpenAIToolChoice;
  parallel_tool_calls?: boolean;
  user?: string;
  safety_identifier?: string | null;
  response_format?: OpenAIResponseFormat;
  logprobs?: boolean | null;
  top_logprobs?: number | null;
  logit_bias?: Record<string, number> | null;
  presence_penalty?: number | null;
  frequency_penalty?: number | null;
  seed?: number | null;
  reasoning_effort?: OpenAIReasoningEffort | null;
  verbosity?: 'low' | 'medium' | 'high' | null;
  modalities?: Array<'text' | 'audio'> | null;
  audio?: unknown;
  prediction?: unknown;
  web_search_options?: unknown;
  functions?: unknown[];
  function_call?: unknown;
  metadata?: Record<string, string> | null;
  store?: boolean | null;
  service_tier?: string | null;
  prompt_cache_key?: string | null;
  prompt_cache_retention?: string | null;
}

// ---------------------------------------------------------------- response

export type OpenAIFinishReason = 'stop' | 'length' | 'tool_calls' | 'content_filter' | 'function_call';

export interface OpenAIUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details?: { cached_tokens?: number; audio_tokens?: number } | null;
  completion_tokens_details?: { reasoning_tokens?: number; audio_tokens?: number } | null;
}

export interface OpenAIResponseMessage {
  role: 'assistant';
  content: string | null;
  refusal: string | null;
  tool_calls?: OpenAIToolCall[];
  function_call?: { name: string; arguments: string } | null;
}

export interface OpenAIChoice {
  index: number;
  message: OpenAIResponseMessage;
  finish_reason: OpenAIFinishReason | null;
  logprobs: unknown;
}

export interface OpenAIChatCompletion {
  id: string;
  object: 'chat.completion';
  created: number;
  model: string;
  choices: OpenAIChoice[];
  usage?: OpenAIUsage;
  system_fingerprint?: string | null;
  service_tier?: string | null;
}

// ---------------------------------------------------------------- stream

export interface OpenAIToolCallDelta {
  index: number;
  id?: string;
  type?: 'function';
  function?: { name?: string; arguments?: string };
}

export interface OpenAIChunkDelta {
  role?: 'assistant';
  content?: string | null;
  refusal?: string | null;
  tool_calls?: OpenAIToolCallDelta[];
  function_call?: { name?: string; arguments?: string };
}

export interface OpenAIChunkChoice {
  index: number;
  delta: OpenAIChunkDelta;
  finish_reason: OpenAIFinishReason | null;
  logprobs?: unknown;
}

export interface OpenAIChatCompletionChunk {
  id: string;
  object: 'chat.completion.chunk';
  created: number;
  model: string;
  choices: OpenAIChunkChoice[];
  usage?: OpenAIUsage | null;
  system_fingerprint?: string | null;
}

// ---------------------------------------------------------------- error

export type OpenAIErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'permission_error'
  | 'not_found_error'
  | 'rate_limit_error'
  | 'api_error'
  | 'server_error';

export interface OpenAIErrorBody {
  error: {
    message: string;
    type: string;
    param: string | null;
    code: string | null;
  };
}
