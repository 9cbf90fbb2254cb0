// Preload for third-party Node servers in tests (`node -r tests/js/loopback.cjs server.js`):
// forces every listening TCP socket onto 127.0.0.1, whatever host the server asked for, and
// honours PORT=0 (ephemeral) by printing "LISTENING <port>" on stderr once bound.
const net = require("net");
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === "number" || typeof args[0] === "string") {
    const port = Number(args[0]);
    const cb = args.find((a) => typeof a === "function");
    const server = this;
    return listen.call(this, port, "127.0.0.1", function () {
      process.stderr.write(`LISTENING ${server.address().port}\n`);
      if (cb) cb.apply(this, arguments);
    });
  }
  if (args[0] && typeof args[0] === "object") {
    args[0] = { ...args[0], host: "127.0.0.1" };
  }
  return listen.apply(this, args);
};
