/**
 * `import()` as Node does it: the starter's import of a marked URL (ts-loader.ts) must reach
 * Node's loader, whose hooks answer it, also from code that a test runner or a bundler loaded
 * and whose own `import()` it rewrote into its own. A CommonJS module is loaded by Node itself.
 */
export = function nativeImport(url: string): Promise<unknown> {
  return import(url);
};
