// The content worker under development (TypeScript sources, run with `--import tsx`): a worker
// thread does not inherit the parent's module hooks on Node 20, so it registers tsx itself.
import { register } from 'tsx/esm/api';

register();
await import('./content-thread.ts');
