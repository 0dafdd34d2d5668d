export type { BusMessage, BusPublisher, BusConsumer } from './types.js';
export { MemoryBus } from './memory.js';
export { BusFullError, BusPayloadTooLargeError } from './errors.js';
export type { MemoryBusOptions } from './memory.js';
export { connectNats, natsServers, natsReplicasFromEnv, ensureReplicas, MAX_NATS_REPLICAS, ensureStream, type StreamCheck, NatsPublisher, NatsConsumer, ResilientNatsPublisher, STREAM_NAME, SUBJECT, DURABLE_NAME, DEADLETTER_STREAM, DEADLETTER_SUBJECT } from './nats.js';
export type { StreamOptions, ConsumerOptions } from './nats.js';
export { writeWithoutCopy, writesWithoutCopy, writtenWithoutCopy } from './writev.js';
