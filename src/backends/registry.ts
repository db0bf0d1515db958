// Which backend runs a model: chosen by the config's `platform` or `backend`. The server's list of
// backends is src/builtin_backends.ts: adding a backend is its folder plus one line there.
import type { ModelConfig } from '../config/types.js';
import { ServalError } from '../kernel/errors.js';
import type { Backend } from './backend.js';

export class BackendRegistry {
  private readonly backends: Backend[] = [];

  constructor(backends: readonly Backend[] = []) {
    for (const b of backends) this.register(b);
  }

  register(backend: Backend): this {
    if (this.backends.some((b) => b.name === backend.name)) throw new Error(`backend '${backend.name}' is registered twice`);
    this.backends.push(backend);
    return this;
  }

  /**
   * The backend for a config. Without platform and backend, the first registered one (Triton
   * picks by the model file's name; ONNX is the default here).
   */
  forConfig(config: ModelConfig, modelName: string): Backend {
    const platform = config.platform ?? '';
    const backend = config.backend ?? '';
    if (!platform && !backend) {
      const first = this.backends[0];
      if (!first) throw ServalError.unavailable(`model '${modelName}': this server has no backends`);
      return first;
    }
    const byPlatform = platform ? this.backends.find((b) => b.platforms.includes(platform)) : undefined;
    const byName = backend ? this.backends.find((b) => b.name === backend) : undefined;
    if (platform && !byPlatform) throw this.unsupported(modelName, 'platform', platform);
    if (backend && !byName) throw this.unsupported(modelName, 'backend', backend);
    if (byPlatform && byName && byPlatform !== byName) {
      throw ServalError.invalidArg(`unexpected 'platform' and 'backend' pair, got:${platform}, ${backend}`);
    }
    return (byName ?? byPlatform)!;
  }

  private unsupported(model: string, what: string, value: string): ServalError {
    const all = this.backends.map((b) => b.displayName);
    const names = all.length > 1 ? `${all.slice(0, -1).join(', ')} and ${all.at(-1)}` : (all[0] ?? 'no');
    const how = this.backends.map((b) => [...b.platforms.map((p) => `platform "${p}"`), `backend "${b.name}"`].join(' or ')).join('; ');
    return ServalError.invalidArg(`model '${model}': unsupported ${what} '${value}'; Serval runs ${names} models only (${how})`);
  }
}
