/*
 * CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as used by iSCSI,
 * ext4 and LevelDB. Check value: crc32c("123456789") == 0xE3069283.
 */
#ifndef RO_CRC32C_H
#define RO_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* ro__crc32c extends crc (0 to start) over len bytes. Uses the SSE4.2
 * instruction where the CPU has it, a table otherwise. Any thread. */
uint32_t ro__crc32c(uint32_t crc, const void *data, size_t len);

/* ro__crc32c_shift returns ro__crc32c_combine(crc1, 0, len2) below with
 * the CRC of len2 zero bytes taken out: the part of crc(A || B) that crc(A)
 * contributes, for |B| = len2. So crc(B) = crc(A || B) ^ shift(crc(A), |B|):
 * the CRC of any slice of a stream from the CRCs of two of its prefixes, in
 * constant time (a few GF(2) products). Any thread. */
uint32_t ro__crc32c_shift(uint32_t crc1, uint64_t len2);

/* ro__crc32c_sw is the portable table version (tests compare the two). */
uint32_t ro__crc32c_sw(uint32_t crc, const void *data, size_t len);

#endif
