/**
 * The addresses a deployed Sluice never connects to on a user's behalf (a component URL, a webhook):
 * loopback, private, link-local (cloud metadata at 169.254.169.254), CGNAT, unspecified, multicast,
 * and their IPv6 forms, including IPv4 behind a translator (IPv4-translated `::ffff:0:0:0/96`,
 * local-use NAT64 `64:ff9b:1::/48`) and site-local `fec0::/10`. Local mode allows them by default
 * (a receiver on the same machine). Lives in the runtime layer, which ships alone, because an
 * `http_request` prop's `execute()` runs there; the adapters re-export it.
 */
import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import { BlockList, isIP } from "node:net";

/** The `code` of the error a refused lookup fails with. */
export const FORBIDDEN_ADDRESS = "ESLUICEFORBIDDEN";

/** Loopback, private, link-local (cloud metadata at 169.254.169.254), CGNAT, unspecified, multicast. */
const FORBIDDEN = new BlockList();
for (const [network, prefix] of [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["224.0.0.0", 3],
] as const) {
  FORBIDDEN.addSubnet(network, prefix, "ipv4");
}
for (const [network, prefix] of [
  ["::", 128],
  ["::1", 128],
  // IPv4-translated (SIIT) and local-use NAT64 reach IPv4 through a translator whose own rules
  // say where; refused whole, as is the deprecated site-local block some networks still route.
  ["::ffff:0:0:0", 96],
  ["64:ff9b:1::", 48],
  ["fc00::", 7],
  ["fe80::", 10],
  ["fec0::", 10],
  ["ff00::", 8],
] as const) {
  FORBIDDEN.addSubnet(network, prefix, "ipv6");
}

/** The 16 bytes of an IPv6 address in any textual form (`::`, hex or a dotted IPv4 tail). */
function ipv6Bytes(address: string): number[] {
  const [head = "", tail] = address.split("::");
  const groups = (text: string) => {
    if (text === "") return [];
    const parts = text.split(":");
    const last = parts[parts.length - 1] ?? "";
    if (!last.includes(".")) return parts.map((part) => Number.parseInt(part, 16));
    const [a = 0, b = 0, c = 0, d = 0] = last.split(".").map(Number);
    return [...parts.slice(0, -1).map((part) => Number.parseInt(part, 16)), (a << 8) | b, (c << 8) | d];
  };
  const front = groups(head);
  const back = tail === undefined ? [] : groups(tail);
  const words = [...front, ...new Array(8 - front.length - back.length).fill(0), ...back];
  return words.flatMap((word) => [word >> 8, word & 0xff]);
}

const dotted = (bytes: number[]) => bytes.join(".");
const startsWith = (bytes: number[], prefix: number[]) => prefix.every((byte, index) => bytes[index] === byte);

/**
 * The IPv4 address an IPv6 address carries, for the forms that reach it: IPv4-mapped
 * (`::ffff:a.b.c.d`, also written in hex), IPv4-compatible (`::a.b.c.d`), NAT64 (`64:ff9b::/96`)
 * and 6to4 (`2002:aabb:ccdd::/48`).
 */
function embeddedIpv4(bytes: number[]): string | undefined {
  const zeros = new Array(10).fill(0);
  if (startsWith(bytes, [...zeros, 0xff, 0xff])) return dotted(bytes.slice(12));
  if (startsWith(bytes, [...zeros, 0, 0]) && bytes.slice(12).some((byte) => byte !== 0)) {
    // `::1` is loopback in its own right (checked as IPv6); `::a.b.c.d` otherwise.
    return bytes.slice(12, 15).every((byte) => byte === 0) && bytes[15] === 1 ? undefined : dotted(bytes.slice(12));
  }
  if (startsWith(bytes, [0x00, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0])) return dotted(bytes.slice(12));
  if (startsWith(bytes, [0x20, 0x02])) return dotted(bytes.slice(2, 6));
  return undefined;
}

/** True for addresses a deployed service must never connect to on a user's behalf. */
export function isForbiddenAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return FORBIDDEN.check(address, "ipv4");
  if (family !== 6) return true;
  // An IPv4 address in disguise is judged as that IPv4 address.
  const ipv4 = embeddedIpv4(ipv6Bytes(address.replace(/%.*$/, "")));
  if (ipv4 !== undefined && FORBIDDEN.check(ipv4, "ipv4")) return true;
  return FORBIDDEN.check(address, "ipv6");
}

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * A socket `lookup` (for http.request / http.get) that fails with code {@link FORBIDDEN_ADDRESS}
 * when any address of the host is forbidden. The socket connects to the address checked here, so
 * DNS rebinding cannot slip a private address in between the check and the connect.
 */
export function guardedLookup(hostname: string, options: object, callback: LookupCallback): void {
  dnsLookup(hostname, { ...options, all: true }, (error, addresses) => {
    if (error) return callback(error, []);
    const list = addresses as LookupAddress[];
    const bad = list.find((entry) => isForbiddenAddress(entry.address));
    if (bad) {
      const refusal = Object.assign(new Error(`${hostname} resolves to a private address (${bad.address})`), {
        code: FORBIDDEN_ADDRESS,
      });
      return callback(refusal, []);
    }
    const wantsAll = (options as { all?: boolean }).all === true;
    if (wantsAll) return callback(null, list);
    const first = list[0];
    if (!first) return callback(Object.assign(new Error(`${hostname} has no address`), { code: "ENOTFOUND" }), []);
    callback(null, first.address, first.family);
  });
}
