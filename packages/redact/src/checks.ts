/** Validity checks that tell a real identifier from a number of the same shape. */

/** Luhn checksum (ISO/IEC 7812-1) over a string of digits. */
export function luhnValid(digits: string): boolean {
  let sum = 0;
  let double = false;
  for (let i = digits.length - 1; i >= 0; i--) {
    let d = digits.charCodeAt(i) - 48;
    if (double) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
    double = !double;
  }
  return sum % 10 === 0;
}

/**
 * Whether a card number's leading digits belong to a scheme that issues cards of that length:
 * Mastercard 2221–2720 and Mir 2200–2204, 30/34–39 (Diners, Amex, JCB), Visa 4, 5 (Mastercard,
 * Maestro), 6 (Discover, UnionPay, Maestro). Numbers starting 0, 1, 7, 8, 9 are not cards.
 */
export function cardPrefixValid(digits: string): boolean {
  const first = digits.charCodeAt(0) - 48;
  if (first === 2) {
    const four = Number(digits.slice(0, 4));
    return (four >= 2200 && four <= 2204) || (four >= 2221 && four <= 2720);
  }
  if (first === 3) {
    const second = digits.charCodeAt(1) - 48;
    return second === 0 || second >= 4;
  }
  return first >= 4 && first <= 6;
}

// IBAN lengths per country, from the SWIFT IBAN registry (release 2024).
const IBAN_LENGTHS: Readonly<Record<string, number>> = {
  AD: 24, AE: 23, AL: 28, AT: 20, AZ: 28, BA: 20, BE: 16, BG: 22, BH: 22, BI: 27, BR: 29, BY: 28,
  CH: 21, CR: 22, CY: 28, CZ: 24, DE: 22, DJ: 27, DK: 18, DO: 28, EE: 20, EG: 29, ES: 24, FI: 18,
  FK: 18, FO: 18, FR: 27, GB: 22, GE: 22, GI: 23, GL: 18, GR: 27, GT: 28, HR: 21, HU: 28, IE: 22,
  IL: 23, IQ: 23, IS: 26, IT: 27, JO: 30, KW: 30, KZ: 20, LB: 28, LC: 32, LI: 21, LT: 20, LU: 20,
  LV: 21, LY: 25, MC: 27, MD: 24, ME: 22, MK: 19, MN: 20, MR: 27, MT: 31, MU: 30, NI: 28, NL: 18,
  NO: 15, OM: 23, PK: 24, PL: 28, PS: 29, PT: 25, QA: 29, RO: 24, RS: 22, RU: 33, SA: 24, SC: 31,
  SD: 18, SE: 24, SI: 19, SK: 24, SM: 27, SO: 23, ST: 25, SV: 28, TL: 23, TN: 24, TR: 26, UA: 29,
  VA: 22, VG: 24, XK: 20, YE: 30,
};

/** The IBAN length of a country, or undefined when the country issues no IBANs. */
export function ibanLength(country: string): number | undefined {
  return IBAN_LENGTHS[country];
}

/** ISO 13616 check: the rearranged number, letters as 10–35, is 1 modulo 97. */
export function ibanValid(iban: string): boolean {
  const expected = IBAN_LENGTHS[iban.slice(0, 2)];
  if (expected === undefined || iban.length !== expected) return false;
  const rearranged = iban.slice(4) + iban.slice(0, 4);
  let rest = 0;
  for (let i = 0; i < rearranged.length; i++) {
    const c = rearranged.charCodeAt(i);
    if (c >= 48 && c <= 57) rest = (rest * 10 + (c - 48)) % 97;
    else if (c >= 65 && c <= 90) rest = (rest * 100 + (c - 55)) % 97;
    else return false;
  }
  return rest === 1;
}

/**
 * US SSN ranges that are never issued: area 000, 666 and 900–999, group 00, serial 0000
 * (https://www.ssa.gov/employer/randomization.html).
 */
export function ssnValid(area: string, group: string, serial: string): boolean {
  const a = Number(area);
  return a !== 0 && a !== 666 && a < 900 && group !== '00' && serial !== '0000';
}

/** Dotted-quad check: four decimal octets 0–255 without leading zeros. */
export function ipv4Valid(s: string): boolean {
  const parts = s.split('.');
  if (parts.length !== 4) return false;
  for (const p of parts) {
    if (p.length === 0 || p.length > 3 || (p.length > 1 && p.charCodeAt(0) === 48) || Number(p) > 255) return false;
  }
  return true;
}

const HEX_GROUP = /^[0-9A-Fa-f]{1,4}$/;

/** RFC 4291 text form: eight groups, or fewer with one `::`, optionally ending in an IPv4 quad. */
export function ipv6Valid(s: string): boolean {
  const halves = s.split('::');
  if (halves.length > 2) return false;
  const groups: string[] = [];
  for (const half of halves) if (half !== '') groups.push(...half.split(':'));
  let count = groups.length;
  const last = groups[groups.length - 1];
  if (last !== undefined && last.includes('.')) {
    if (!ipv4Valid(last)) return false;
    groups.pop();
    count += 1; // an IPv4 tail stands for two groups
  }
  for (const g of groups) if (!HEX_GROUP.test(g)) return false;
  return halves.length === 2 ? count <= 7 : count === 8;
}
