// The surface a program sees, built before it runs (crates/coderun/src/engine.rs). The engine
// evaluates this one function expression and calls it with its two native functions and the
// visible names; they stay in this closure and are never reachable from `globalThis`. It returns
// `settle` and `finish`, which only the engine holds. Intrinsics are taken here, before the
// program can replace them.
(function (nativeCall, nativeLog, names) {
  "use strict";
  const G = globalThis;
  const P = Promise;
  const stringify = JSON.stringify;
  const create = Object.create;
  const define = Object.defineProperty;
  const freeze = Object.freeze;
  const Str = String;
  const TypeErr = TypeError;

  class ToolError extends Error {
    constructor(message, fields) {
      super(message);
      const f = fields === undefined || fields === null ? {} : fields;
      this.reason = f.reason === undefined ? null : f.reason;
      this.code = f.code === undefined ? null : f.code;
      this.tool = f.tool === undefined ? null : f.tool;
      this.result = f.result === undefined ? null : f.result;
    }
  }
  define(ToolError.prototype, "name", { value: "ToolError", writable: true, configurable: true });

  // The calls waiting for their answer, by id (a null-prototype object: nothing the program
  // puts on Object.prototype or Map.prototype reaches it).
  const waiting = create(null);

  const call = function (name, args) {
    if (typeof name !== "string") {
      throw new TypeErr("tools.call(name, args): the name must be a string");
    }
    const text = stringify(args === undefined ? {} : args);
    if (typeof text !== "string") {
      throw new TypeErr("the arguments of " + name + " cannot be written as JSON");
    }
    return new P(function (resolve, reject) {
      const id = nativeCall(name, text);
      waiting[id] = { resolve: resolve, reject: reject, name: name };
    });
  };

  const tools = create(null);
  for (let i = 0; i < names.length; i++) {
    const name = names[i];
    if (name === "call") continue; // `tools.call` is the function; that tool is tools.call("call", …)
    define(tools, name, { value: function (args) { return call(name, args); }, enumerable: true });
  }
  define(tools, "call", { value: call });
  freeze(tools);

  const show = function (value) {
    if (typeof value === "string") return value;
    try {
      const text = stringify(value);
      return typeof text === "string" ? text : Str(value);
    } catch (e) {
      try { return Str(value); } catch (e2) { return "[unprintable]"; }
    }
  };
  const line = function (args) {
    let text = "";
    for (let i = 0; i < args.length; i++) text += (i === 0 ? "" : " ") + show(args[i]);
    nativeLog(text);
  };
  const log = function (...args) { line(args); };
  const console = create(null);
  for (const level of ["log", "info", "warn", "error", "debug"]) define(console, level, { value: log, enumerable: true });
  freeze(console);

  define(G, "tools", { value: tools, enumerable: false, writable: false, configurable: false });
  define(G, "ToolError", { value: ToolError, enumerable: false, writable: true, configurable: true });
  define(G, "console", { value: console, enumerable: false, writable: true, configurable: true });

  // The engine's side: an answer for call `id` (its value, or the failure's fields).
  const settle = function (id, ok, payload) {
    const pending = waiting[id];
    if (pending === undefined) return;
    delete waiting[id];
    if (ok) {
      pending.resolve(payload);
    } else {
      const fields = { reason: payload.reason, code: payload.code, tool: pending.name, result: payload.result };
      pending.reject(new ToolError(Str(payload.message), fields));
    }
  };
  // The program's value as JSON text (`null` for what JSON has no text for).
  const finish = function (value) {
    const text = stringify(value, function (key, v) {
      if (typeof v === "bigint") {
        throw new TypeErr("a BigInt cannot be written as JSON (convert it with String() or Number())");
      }
      return v;
    });
    return typeof text === "string" ? text : "null";
  };
  return { settle: settle, finish: finish };
})
