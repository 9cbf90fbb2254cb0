// A minimal MCP Apps host for the gateway's browser test (tests/browser/apps_host_test.py): the
// MCP TypeScript client connects to the gateway named in `?gateway=`, finds the tool named in
// `?tool=` (by its gateway name), reads the UI resource its `_meta.ui.resourceUri` points at,
// renders it in a sandboxed iframe, and bridges the app to the gateway with ext-apps' AppBridge,
// so the app's own calls (by its server's bare tool names) go through the gateway too. What the
// host sees is written into #status for the test to read.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { AppBridge, PostMessageTransport } from "@modelcontextprotocol/ext-apps/app-bridge";

const status = (text) => {
  document.getElementById("status").textContent = text;
};

async function main() {
  const params = new URLSearchParams(location.search);
  const gateway = params.get("gateway");
  const toolName = params.get("tool");
  const client = new Client(
    { name: "mcpgate-apps-host", version: "1.0.0" },
    { capabilities: { extensions: { "io.modelcontextprotocol/ui": { mimeTypes: ["text/html;profile=mcp-app"] } } } },
  );
  await client.connect(new StreamableHTTPClientTransport(new URL(gateway)));
  const { tools } = await client.listTools();
  const tool = tools.find((t) => t.name === toolName);
  if (!tool) throw new Error(`no tool ${toolName} in ${tools.map((t) => t.name).join(", ")}`);
  const uri = tool._meta?.ui?.resourceUri;
  if (!uri || !uri.startsWith("ui://")) throw new Error(`tool ${toolName} points at no ui:// resource: ${JSON.stringify(tool._meta)}`);
  const read = await client.readResource({ uri });
  const html = read.contents[0].text;
  document.getElementById("resource").textContent = uri;
  const iframe = document.createElement("iframe");
  iframe.id = "app";
  iframe.sandbox = "allow-scripts allow-same-origin";
  iframe.style = "width: 100%; height: 400px; border: 1px solid #888";
  document.body.appendChild(iframe);
  const bridge = new AppBridge(client, { name: "mcpgate-apps-host", version: "1.0.0" }, { serverTools: {}, serverResources: {}, logging: {} });
  bridge.oninitialized = () => status("app initialized");
  const loaded = new Promise((resolve) => iframe.addEventListener("load", resolve, { once: true }));
  iframe.srcdoc = html;
  await loaded;
  await bridge.connect(new PostMessageTransport(iframe.contentWindow, iframe.contentWindow));
  status(status.textContent || "app connected");
}

main().catch((e) => status(`error: ${e && e.stack ? e.stack : e}`));
