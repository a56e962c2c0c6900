import { Inject, Injectable, type OnModuleInit } from '@nestjs/common';
import { ApplicationConfig, HttpAdapterHost } from '@nestjs/core';
import type { DataSource } from 'typeorm';
import { InvalidArgumentError } from '../core/errors';
import { createDashboard, type DashboardOptions } from '../dashboard';

/** `CheckpointModule.forRoot({ dashboard })`: where to serve the dashboard, and its options. */
export interface CheckpointDashboardOptions extends DashboardOptions {
  /** The mount path, e.g. `/ops`; the application's global prefix is put in front of it. */
  path: string;
}

export const CHECKPOINT_DASHBOARD_OPTIONS = Symbol('CHECKPOINT_DASHBOARD_OPTIONS');
export const CHECKPOINT_DASHBOARD_DATA_SOURCE = Symbol('CHECKPOINT_DASHBOARD_DATA_SOURCE');

export function checkDashboardOptions(options: unknown): asserts options is CheckpointDashboardOptions {
  const path = (options as CheckpointDashboardOptions | null)?.path;
  if (typeof options !== 'object' || options === null || typeof path !== 'string' || !/^\/[^?#]*$/.test(path)) {
    throw new InvalidArgumentError(
      "CheckpointModule: dashboard.path must be a path starting with '/', e.g. { dashboard: { path: '/ops' } }.",
    );
  }
}

/**
 * Mounts the dashboard on the HTTP adapter when the module initialises: after the application's
 * global prefix is known and its routes are registered, before Nest's not-found handler.
 */
@Injectable()
export class CheckpointDashboardMount implements OnModuleInit {
  constructor(
    private readonly adapterHost: HttpAdapterHost,
    private readonly config: ApplicationConfig,
    @Inject(CHECKPOINT_DASHBOARD_DATA_SOURCE) private readonly dataSource: DataSource,
    @Inject(CHECKPOINT_DASHBOARD_OPTIONS) private readonly options: CheckpointDashboardOptions,
  ) {}

  /** The full mount path: global prefix, then `path`, without a trailing slash. */
  mountPath(): string {
    const prefix = this.config.getGlobalPrefix().replace(/^\/+|\/+$/g, '');
    const path = this.options.path.replace(/^\/+|\/+$/g, '');
    return `/${[prefix, path].filter((part) => part !== '').join('/')}`;
  }

  /** Mounts the dashboard at {@link CheckpointDashboardMount.mountPath} (nothing to do without an HTTP adapter). */
  onModuleInit(): void {
    const adapter = this.adapterHost.httpAdapter;
    // Standalone application contexts (no HTTP server) have nothing to mount on.
    if (!adapter) return;
    const { path: _path, ...options } = this.options;
    const handler = createDashboard(this.dataSource, options);
    adapter.use(this.mountPath(), handler);
  }
}
