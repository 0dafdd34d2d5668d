export { SseParser, formatSse } from './sse.js';
export type { SseEvent, SseParserOptions } from './sse.js';

export { TranslationError, isTranslationError } from './errors.js';
export type { TranslationErrorCode } from './errors.js';

export {
  MAX_ERROR_MESSAGE_LENGTH,
  REDACTED,
  anthropicErrorToOpenAI,
  anthropicErrorToOpenAIBody,
  anthropicErrorTypeToOpenAI,
  openaiErrorToAnthropic,
  openaiErrorToAnthropicBody,
  openaiErrorTypeToAnthropic,
  scrubSecrets,
  translationErrorToAnthropic,
  translationErrorToOpenAI,
} from './errors-map.js';
export type { MappedError } from './errors-map.js';

export { clientRequestedUsage, isUsageOnlyChunk, usageOnlyChunk, withStreamUsage, withStreamUsageBytes } from './usage.js';

// OpenAI client side: its request out to Anthropic, Anthropic's answers back.
export { DEFAULT_ANTHROPIC_MAX_TOKENS, openaiRequestToAnthropic } from './openai/request.js';
export type { OpenAIRequestToAnthropicOptions } from './openai/request.js';
export { anthropicResponseToOpenAI, anthropicStopReasonToOpenAI, anthropicUsageToOpenAI } from './openai/response.js';
export type { AnthropicResponseToOpenAIOptions, AnthropicTokenCounts } from './openai/response.js';
export { AnthropicStreamToOpenAI } from './openai/stream.js';
export type { AnthropicStreamToOpenAIOptions } from './openai/stream.js';

// Anthropic client side: its request out to OpenAI, OpenAI's answers back.
export { anthropicRequestToOpenAI } from './anthropic/request.js';
export type { AnthropicRequestToOpenAIOptions } from './anthropic/request.js';
export {
  openaiFinishReasonToAnthropic,
  openaiResponseToAnthropic,
  openaiUsageToAnthropic,
  parseToolArguments,
} from './anthropic/response.js';
export type {
  InvalidToolArguments,
  OpenAIResponseToAnthropicOptions,
  OpenAIResponseToAnthropicResult,
  OpenAITokenCounts,
} from './anthropic/response.js';
export { OpenAIStreamToAnthropic } from './anthropic/stream.js';
export type { OpenAIStreamToAnthropicOptions } from './anthropic/stream.js';

// OpenAI Responses API client side: its request out to Anthropic, Anthropic's answers back.
export { responsesRequestToAnthropic } from './responses/request.js';
export type { ResponsesRequestToAnthropicOptions } from './responses/request.js';
export { anthropicResponseToResponses, anthropicUsageToResponses, responsesStatus } from './responses/response.js';
export type { AnthropicResponseToResponsesOptions, ResponsesOutcome } from './responses/response.js';
export { AnthropicStreamToResponses } from './responses/stream.js';
export type { AnthropicStreamToResponsesOptions } from './responses/stream.js';

export type {
  ResponsesContentPartEvent,
  ResponsesError,
  ResponsesErrorEvent,
  ResponsesFunctionCall,
  ResponsesFunctionCallArgumentsDeltaEvent,
  ResponsesFunctionCallArgumentsDoneEvent,
  ResponsesFunctionCallOutput,
  ResponsesFunctionTool,
  ResponsesIncompleteDetails,
  ResponsesInputContent,
  ResponsesInputFile,
  ResponsesInputImage,
  ResponsesInputItem,
  ResponsesInputMessage,
  ResponsesInputText,
  ResponsesItemReference,
  ResponsesItemStatus,
  ResponsesLifecycleEvent,
  ResponsesOtherTool,
  ResponsesOutputFunctionCall,
  ResponsesOutputItem,
  ResponsesOutputItemEvent,
  ResponsesOutputMessage,
  ResponsesOutputReasoning,
  ResponsesOutputRefusal,
  ResponsesOutputText,
  ResponsesOutputTextDeltaEvent,
  ResponsesOutputTextDoneEvent,
  ResponsesReasoningConfig,
  ResponsesReasoningEffort,
  ResponsesReasoningItem,
  ResponsesReasoningSummaryPartEvent,
  ResponsesReasoningSummaryTextDeltaEvent,
  ResponsesReasoningSummaryTextDoneEvent,
  ResponsesReasoningText,
  ResponsesRequest,
  ResponsesResponse,
  ResponsesStatus,
  ResponsesStreamEvent,
  ResponsesSummaryText,
  ResponsesTextConfig,
  ResponsesTextFormat,
  ResponsesTool,
  ResponsesToolChoice,
  ResponsesUsage,
} from './responses/types.js';

export type {
  OpenAIAssistantContentPart,
  OpenAIAssistantMessage,
  OpenAIChatCompletion,
  OpenAIChatCompletionChunk,
  OpenAIChatRequest,
  OpenAIChoice,
  OpenAIChunkChoice,
  OpenAIChunkDelta,
  OpenAICustomTool,
  OpenAIDeveloperMessage,
  OpenAIErrorBody,
  OpenAIErrorType,
  OpenAIFilePart,
  OpenAIFinishReason,
  OpenAIFunctionDefinition,
  OpenAIFunctionMessage,
  OpenAIFunctionTool,
  OpenAIImagePart,
  OpenAIInputAudioPart,
  OpenAIMessage,
  OpenAIReasoningEffort,
  OpenAIRefusalPart,
  OpenAIResponseFormat,
  OpenAIResponseMessage,
  OpenAIStreamOptions,
  OpenAISystemMessage,
  OpenAITextPart,
  OpenAITool,
  OpenAIToolCall,
  OpenAIToolCallDelta,
  OpenAIToolChoice,
  OpenAIToolMessage,
  OpenAIUsage,
  OpenAIUserContentPart,
  OpenAIUserMessage,
} from './openai/types.js';

export type {
  AnthropicBase64ImageSource,
  AnthropicCacheControl,
  AnthropicContentBlock,
  AnthropicContentBlockDeltaEvent,
  AnthropicContentBlockParam,
  AnthropicContentBlockStartEvent,
  AnthropicContentBlockStopEvent,
  AnthropicContentDelta,
  AnthropicDocumentBlockParam,
  AnthropicDocumentSource,
  AnthropicErrorBody,
  AnthropicErrorEvent,
  AnthropicErrorType,
  AnthropicImageBlockParam,
  AnthropicImageMediaType,
  AnthropicInputSchema,
  AnthropicMessage,
  AnthropicMessageDeltaEvent,
  AnthropicMessageDeltaUsage,
  AnthropicMessageParam,
  AnthropicMessageStartEvent,
  AnthropicMessageStopEvent,
  AnthropicMessagesRequest,
  AnthropicOutputConfig,
  AnthropicPingEvent,
  AnthropicRedactedThinkingBlock,
  AnthropicRedactedThinkingBlockParam,
  AnthropicServerTool,
  AnthropicStopReason,
  AnthropicStreamEvent,
  AnthropicTextBlock,
  AnthropicTextBlockParam,
  AnthropicThinkingBlock,
  AnthropicThinkingBlockParam,
  AnthropicThinkingConfig,
  AnthropicTool,
  AnthropicToolChoice,
  AnthropicToolResultBlockParam,
  AnthropicToolUseBlock,
  AnthropicToolUseBlockParam,
  AnthropicUrlImageSource,
  AnthropicUsage,
} from './anthropic/types.js';
