/**
 * The subset of the OpenAI Responses API (`POST /v1/responses`) this package reads and writes.
 * Field names and shapes follow https://platform.openai.com/docs/api-reference/responses and
 * the official `openai` SDK's type definitions (resources/responses/responses.d.ts), whose
 * wire shapes these match. Inputs arrive as parsed JSON, so the translators still check
 * shapes at run time.
 */

// ---------------------------------------------------------------- request: content

export interface ResponsesInputText {
  type: 'input_text';
  text: string;
}

export interface ResponsesInputImage {
  type: 'input_image';
  /** A fully qualified URL or a base64 `data:` URL. */
  image_url?: string | null;
  /** An uploaded file (OpenAI Files API). */
  file_id?: string | null;
  detail?: 'low' | 'high' | 'auto' | 'original';
}

export interface ResponsesInputFile {
  type: 'input_file';
  /** The file's content as a base64 `data:` URL. */
  file_data?: string;
  file_id?: string | null;
  file_url?: string;
  filename?: string;
}

export type ResponsesInputContent = ResponsesInputText | ResponsesInputImage | ResponsesInputFile;

export interface ResponsesOutputText {
  type: 'output_text';
  text: string;
  annotations: unknown[];
  logprobs?: unknown[];
}

export interface ResponsesOutputRefusal {
  type: 'refusal';
  refusal: string;
}

export interface ResponsesSummaryText {
  type: 'summary_text';
  text: string;
}

export interface ResponsesReasoningText {
  type: 'reasoning_text';
  text: string;
}

// ---------------------------------------------------------------- request: input items

export type ResponsesItemStatus = 'in_progress' | 'completed' | 'incomplete';

/**
 * A message in `input`. `type` may be omitted (the SDK's EasyInputMessage). Assistant
 * messages replayed from an earlier response carry `id`, `status` and output_text parts.
 */
export interface ResponsesInputMessage {
  type?: 'message';
  role: 'user' | 'assistant' | 'system' | 'developer';
  content: string | Array<ResponsesInputContent | ResponsesOutputText | ResponsesOutputRefusal>;
  id?: string;
  status?: ResponsesItemStatus;
  phase?: 'commentary' | 'final_answer' | null;
}

/** A tool call the model made (replayed in `input` for the next turn). */
export interface ResponsesFunctionCall {
  type: 'function_call';
  call_id: string;
  name: string;
  /** JSON text of the arguments. */
  arguments: string;
  id?: string;
  status?: ResponsesItemStatus;
}

/** The result of a tool call, sent back by the client. */
export interface ResponsesFunctionCallOutput {
  type: 'function_call_output';
  call_id: string;
  output: string | ResponsesInputContent[];
  id?: string | null;
  status?: ResponsesItemStatus | null;
}

export interface ResponsesReasoningItem {
  type: 'reasoning';
  id: string;
  summary: ResponsesSummaryText[];
  content?: ResponsesReasoningText[];
  encrypted_content?: string | null;
  status?: ResponsesItemStatus;
}

/** A reference to an item stored by the provider. */
export interface ResponsesItemReference {
  type: 'item_reference';
  id: string;
}

export type ResponsesInputItem =
  | ResponsesInputMessage
  | ResponsesFunctionCall
  | ResponsesFunctionCallOutput
  | ResponsesReasoningItem
  | ResponsesItemReference;

// ---------------------------------------------------------------- request: tools and settings

export interface ResponsesFunctionTool {
  type: 'function';
  name: string;
  description?: string | null;
  parameters?: Record<string, unknown> | null;
  /** Defaults to true in OpenAI's API. */
  strict?: boolean | null;
}

/** Hosted tools (web_search, file_search, computer_use_preview, code_interpreter, mcp, ...) and custom tools. */
export interface ResponsesOtherTool {
  type: string;
  [key: string]: unknown;
}

export type ResponsesTool = ResponsesFunctionTool | ResponsesOtherTool;

export type ResponsesToolChoice =
  | 'none'
  | 'auto'
  | 'required'
  | { type: 'function'; name: string }
  | { type: 'allowed_tools'; mode: 'auto' | 'required'; tools: Array<Record<string, unknown>> }
  /** Hosted tool types, `custom`, `mcp`, ... */
  | { type: string; name?: string };

export type ResponsesTextFormat =
  | { type: 'text' }
  | { type: 'json_object' }
  | { type: 'json_schema'; name: string; schema: Record<string, unknown>; description?: string; strict?: boolean | null };

export interface ResponsesTextConfig {
  format?: ResponsesTextFormat;
  verbosity?: 'low' | 'medium' | 'high' | null;
}

export type ResponsesReasoningEffort = 'none' | 'minimal' | 'low' | 'medium' | 'high' | 'xhigh' | 'max';

export interface ResponsesReasoningConfig {
  effort?: ResponsesReasoningEffort | null;
  summary?: 'auto' | 'concise' | 'detailed' | null;
  generate_summary?: 'auto' | 'concise' | 'detailed' | null;
}

export interface ResponsesRequest {
  model: string;
  input?: string | ResponsesInputItem[];
  instructions?: string | null;
  tools?: ResponsesTool[];
  tool_choice?: ResponsesToolChoice;
  parallel_tool_calls?: boolean | null;
  max_output_tokens?: number | null;
  max_tool_calls?: number | null;
  temperature?: number | null;
  top_p?: number | null;
  top_logprobs?: number | null;
  stream?: boolean | null;
  stream_options?: { include_obfuscation?: boolean } | null;
  text?: ResponsesTextConfig | null;
  metadata?: Record<string, string> | null;
  /** Continue from a stored response (needs a provider that keeps state). */
  previous_response_id?: string | null;
  /** A stored conversation (needs a provider that keeps state). */
  conversation?: string | { id: string } | null;
  /** Keep the response for later retrieval. Defaults to true in OpenAI's API. */
  store?: boolean | null;
  background?: boolean | null;
  /** A stored prompt template. */
  prompt?: unknown;
  include?: string[] | null;
  truncation?: 'auto' | 'disabled' | null;
  user?: string;
  safety_identifier?: string | null;
  reasoning?: ResponsesReasoningConfig | null;
  service_tier?: string | null;
  prompt_cache_key?: string | null;
  prompt_cache_retention?: string | null;
}

// ---------------------------------------------------------------- response

export type ResponsesStatus = 'completed' | 'failed' | 'in_progress' | 'cancelled' | 'queued' | 'incomplete';

export interface ResponsesOutputMessage {
  id: string;
  type: 'message';
  status: ResponsesItemStatus;
  role: 'assistant';
  content: Array<ResponsesOutputText | ResponsesOutputRefusal>;
}

export interface ResponsesOutputFunctionCall {
  id: string;
  type: 'function_call';
  status: ResponsesItemStatus;
  /** JSON text of the arguments. */
  arguments: string;
  call_id: string;
  name: string;
}

export interface ResponsesOutputReasoning {
  id: string;
  type: 'reasoning';
  summary: ResponsesSummaryText[];
  content?: ResponsesReasoningText[];
  encrypted_content?: string | null;
}

export type ResponsesOutputItem = ResponsesOutputMessage | ResponsesOutputFunctionCall | ResponsesOutputReasoning;

export interface ResponsesUsage {
  /** All input tokens, cached ones included. */
  input_tokens: number;
  input_tokens_details: { cached_tokens: number; cache_write_tokens?: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
}

export interface ResponsesIncompleteDetails {
  reason: 'max_output_tokens' | 'content_filter';
}

export interface ResponsesError {
  code: string;
  message: string;
}

/** The response object (`object: 'response'`), in the field order OpenAI writes it. */
export interface ResponsesResponse {
  id: string;
  object: 'response';
  created_at: number;
  status: ResponsesStatus;
  background: boolean;
  error: ResponsesError | null;
  incomplete_details: ResponsesIncompleteDetails | null;
  instructions: string | null;
  max_output_tokens: number | null;
  model: string;
  output: ResponsesOutputItem[];
  parallel_tool_calls: boolean;
  previous_response_id: string | null;
  reasoning: { effort: ResponsesReasoningEffort | null; summary: string | null };
  store: boolean;
  temperature: number;
  text: ResponsesTextConfig;
  tool_choice: ResponsesToolChoice;
  tools: ResponsesTool[];
  top_p: number;
  truncation: 'auto' | 'disabled';
  /** null in the in-progress snapshots of a stream. */
  usage: ResponsesUsage | null;
  user: string | null;
  metadata: Record<string, string>;
}

// ---------------------------------------------------------------- stream
// Every event is written as `event: <type>\ndata: <json>\n\n`; `sequence_number` counts
// the stream's events from 0.

export interface ResponsesLifecycleEvent {
  type: 'response.created' | 'response.in_progress' | 'response.completed' | 'response.incomplete' | 'response.failed';
  sequence_number: number;
  response: ResponsesResponse;
}

export interface ResponsesOutputItemEvent {
  type: 'response.output_item.added' | 'response.output_item.done';
  sequence_number: number;
  output_index: number;
  item: ResponsesOutputItem;
}

export interface ResponsesContentPartEvent {
  type: 'response.content_part.added' | 'response.content_part.done';
  sequence_number: number;
  item_id: string;
  output_index: number;
  content_index: number;
  part: ResponsesOutputText;
}

export interface ResponsesOutputTextDeltaEvent {
  type: 'response.output_text.delta';
  sequence_number: number;
  item_id: string;
  output_index: number;
  content_index: number;
  delta: string;
  logprobs: unknown[];
}

export interface ResponsesOutputTextDoneEvent {
  type: 'response.output_text.done';
  sequence_number: number;
  item_id: string;
  output_index: number;
  content_index: number;
  text: string;
  logprobs: unknown[];
}

export interface ResponsesFunctionCallArgumentsDeltaEvent {
  type: 'response.function_call_arguments.delta';
  sequence_number: number;
  item_id: string;
  output_index: number;
  delta: string;
}

export interface ResponsesFunctionCallArgumentsDoneEvent {
  type: 'response.function_call_arguments.done';
  sequence_number: number;
  item_id: string;
  output_index: number;
  arguments: string;
}

export interface ResponsesReasoningSummaryPartEvent {
  type: 'response.reasoning_summary_part.added' | 'response.reasoning_summary_part.done';
  sequence_number: number;
  item_id: string;
  output_index: number;
  summary_index: number;
  part: ResponsesSummaryText;
}

export interface ResponsesReasoningSummaryTextDeltaEvent {
  type: 'response.reasoning_summary_text.delta';
  sequence_number: number;
  item_id: string;
  output_index: number;
  summary_index: number;
  delta: string;
}

export interface ResponsesReasoningSummaryTextDoneEvent {
  type: 'response.reasoning_summary_text.done';
  sequence_number: number;
  item_id: string;
  output_index: number;
  summary_index: number;
  text: string;
}

/** A stream error; the stream ends after it. */
export interface ResponsesErrorEvent {
  type: 'error';
  sequence_number: number;
  code: string | null;
  message: string;
  param: string | null;
}

export type ResponsesStreamEvent =
  | ResponsesLifecycleEvent
  | ResponsesOutputItemEvent
  | ResponsesContentPartEvent
  | ResponsesOutputTextDeltaEvent
  | ResponsesOutputTextDoneEvent
  | ResponsesFunctionCallArgumentsDeltaEvent
  | ResponsesFunctionCallArgumentsDoneEvent
  | ResponsesReasoningSummaryPartEvent
  | ResponsesReasoningSummaryTextDeltaEvent
  | ResponsesReasoningSummaryTextDoneEvent
  | ResponsesErrorEvent;
