/* sha256.c - see sha256.h. */
#include <stdio.h>

#include <openssl/evp.h>

#include "sha256.h"

int
sha256_hex(const void *p, size_t len, char out[65])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int n = 0;

	out[0] = '\0';
	if (EVP_Digest(p, len, md, &n, EVP_sha256(), NULL) != 1 || n != 32)
		return -1;
	for (unsigned int i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", md[i]);
	return 0;
}
