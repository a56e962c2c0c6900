import { createServer } from 'node:http';
import type { RequestMethod } from '@nestjs/common';
import { AbstractHttpAdapter } from '@nestjs/core';
import express, { type Request, type Response } from 'express';

/**
 * The parts of `@nestjs/platform-express`'s ExpressAdapter a Nest application without controllers
 * uses (that package is not a dependency here): an Express instance, Nest's body parsers, its
 * not-found and error handlers. With `@nestjs/platform-express` installed, `new ExpressAdapter()`
 * does the same.
 */
export class NestExpressAdapter extends AbstractHttpAdapter {
  constructor() {
    super(express());
  }

  initHttpServer(): void {
    this.httpServer = createServer(this.getInstance());
  }

  override listen(port: string | number, ...args: unknown[]): unknown {
    return (this.getHttpServer() as ReturnType<typeof createServer>).listen(port, ...(args as []));
  }

  getType(): string {
    return 'express';
  }

  registerParserMiddleware(): void {
    const app = this.getInstance<express.Express>();
    app.use(express.json());
    app.use(express.urlencoded({ extended: true }));
  }

  createMiddlewareFactory(_method: RequestMethod): (path: string, callback: Function) => unknown {
    return (path, callback) => this.use(path, callback);
  }

  setNotFoundHandler(handler: Function): void {
    this.use(handler);
  }

  setErrorHandler(handler: Function): void {
    this.use(handler);
  }

  close(): Promise<void> {
    const server = this.getHttpServer() as ReturnType<typeof createServer> | undefined;
    if (!server?.listening) return Promise.resolve();
    server.closeAllConnections();
    return new Promise((resolve) => server.close(() => resolve()));
  }

  reply(response: Response, body: unknown, statusCode?: number): void {
    if (statusCode) response.status(statusCode);
    if (body === undefined || body === null) response.end();
    else if (typeof body === 'object') response.json(body);
    else response.send(String(body));
  }

  status(response: Response, statusCode: number): void {
    response.status(statusCode);
  }

  end(response: Response, message?: string): void {
    response.end(message);
  }

  redirect(response: Response, statusCode: number, url: string): void {
    response.redirect(statusCode, url);
  }

  isHeadersSent(response: Response): boolean {
    return response.headersSent;
  }

  getHeader(response: Response, name: string): unknown {
    return response.get(name);
  }

  setHeader(response: Response, name: string, value: string): void {
    response.set(name, value);
  }

  appendHeader(response: Response, name: string, value: string): void {
    response.append(name, value);
  }

  getRequestHostname(request: Request): string {
    return request.hostname;
  }

  getRequestMethod(request: Request): string {
    return request.method;
  }

  getRequestUrl(request: Request): string {
    return request.originalUrl;
  }

  useStaticAssets(): void {}
  setViewEngine(): void {}
  render(): void {}
  enableCors(): void {}

  applyVersionFilter(handler: Function): (req: unknown, res: unknown, next: () => void) => Function {
    return handler as never;
  }
}
