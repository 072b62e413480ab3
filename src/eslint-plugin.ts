/**
 * An ESLint plugin for code that uses multiloop, imported as `multiloop/eslint`. Its one rule,
 * `no-floating-coroutine`, reports a coroutine created and dropped: `fetchUser(1);` as a
 * statement makes a generator object that nothing ever runs (asyncio warns "coroutine ... was
 * never awaited" when such an object is collected). JavaScript gives no hook when a generator
 * object is made or dropped, so no check at run time can see it; the type checker can, so the
 * rule needs typescript-eslint's typed linting (`parserOptions.project` or `projectService`).
 *
 * @example
 * ```ts
 * // eslint.config.js
 * import multiloop from 'multiloop/eslint';
 * export default [
 *   ...tseslint.configs.recommended,
 *   { plugins: { multiloop }, rules: { 'multiloop/no-floating-coroutine': 'error' } },
 * ];
 * ```
 */
import type { Rule } from 'eslint';
import type ts from 'typescript';

/** What the rule needs of typescript-eslint's parser services. */
interface ParserServices {
  program?: ts.Program;
  esTreeNodeToTSNodeMap?: { get(node: unknown): ts.Node };
}

/** Whether `type` (or every member of a union) is a Generator: a coroutine. */
function isCoroutineType(type: ts.Type): boolean {
  if (type.isUnion()) return type.types.length > 0 && type.types.every(isCoroutineType);
  const name = (type.aliasSymbol ?? type.getSymbol())?.getName();
  return name === 'Generator' || name === 'Coroutine';
}

/** The name of what a call calls, for the message: `fetchUser` of `fetchUser(1)` or `api.fetchUser(1)`. */
function calleeName(node: Rule.Node): string {
  if (node.type !== 'CallExpression') return 'this coroutine';
  const callee = node.callee;
  if (callee.type === 'Identifier') return `${callee.name}()`;
  if (callee.type === 'MemberExpression' && callee.property.type === 'Identifier') return `${callee.property.name}()`;
  return 'this coroutine';
}

const noFloatingCoroutine: Rule.RuleModule = {
  meta: {
    type: 'problem',
    docs: { description: 'Require a coroutine to be awaited with yield*, run as a task, or handed on' },
    messages: {
      floating:
        '{{name}} makes a coroutine that nothing runs: await it with yield*, or run it with createTask(); as a statement it does nothing',
    },
    schema: [],
  },
  create(context) {
    const services = context.sourceCode.parserServices as ParserServices | undefined;
    const program = services?.program;
    const map = services?.esTreeNodeToTSNodeMap;
    if (program === undefined || map === undefined) return {};
    const checker = program.getTypeChecker();
    return {
      ExpressionStatement(node) {
        const expression = node.expression as Rule.Node;
        if (expression.type !== 'CallExpression') return;
        const type = checker.getTypeAtLocation(map.get(expression));
        if (isCoroutineType(type)) context.report({ node, messageId: 'floating', data: { name: calleeName(expression) } });
      },
    };
  },
};

/** The plugin: `plugins: { multiloop }`, then `'multiloop/no-floating-coroutine': 'error'`. */
const plugin = {
  meta: { name: 'multiloop' },
  rules: { 'no-floating-coroutine': noFloatingCoroutine },
};

export default plugin;
