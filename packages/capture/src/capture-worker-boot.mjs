// Entry of the capture worker thread. Workers do not inherit the TypeScript loader the
// apps start with (`node --import tsx`), so the worker registers it before loading its code.
import { register } from 'tsx/esm/api';

register();
await import('./capture-worker.ts');
