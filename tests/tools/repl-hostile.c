// SPDX-License-Identifier: GPL-2.0
/*
 * repl-hostile: exercise /dev/dm-repl as a hostile or broken consumer would.
 *
 *   repl-hostile <dm-device> [--iterations N] [--seed S]
 *
 * Checks every refusal the kernel owes us (bad attach arguments, double
 * attach, a second consumer, ioctls before attach, writable or oversized
 * mappings of the read-only part, bad buffers), then scribbles random
 * values over the consumer line of the header (and over the kernel's own
 * fields, which the kernel must never read back) and rings the doorbell,
 * N times.  Invalid release/ack values must be refused with EINVAL and
 * valid ones accepted.  At the end it puts sane values back and checks that
 * the kernel's view is intact.  The caller runs I/O on the device meanwhile
 * and checks dmesg: the kernel must not oops, warn or hang.
 *
 * Exit: 0 all checks passed, 1 a check failed, 2 usage/setup error.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <linux/dm-repl.h>

static int failures;

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                       \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			failures++;                                                                \
		}                                                                                  \
	} while (0)

static uint64_t rng_state;

static uint64_t rnd(void)
{
	/* xorshift64* */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 2685821657736338717ULL;
}

static int ctl_open(void)
{
	int fd = open("/dev/" DM_REPL_MISC_NAME, O_RDWR | O_CLOEXEC);

	if (fd < 0) {
		fprintf(stderr, "repl-hostile: open /dev/%s: %s\n", DM_REPL_MISC_NAME, strerror(errno));
		exit(2);
	}
	return fd;
}

/* ioctl that is expected to fail with @err */
static void expect_errno(int fd, unsigned long cmd, void *arg, int err, const char *what)
{
	int r = ioctl(fd, cmd, arg);

	CHECK(r < 0 && errno == err, "%s: expected %s, got %d (%s)", what, strerror(err), r,
	      r < 0 ? strerror(errno) : "success");
}

static void expect_mmap_fail(int fd, size_t len, int prot, off_t off, int err, const char *what)
{
	void *p = mmap(NULL, len, prot, MAP_SHARED, fd, off);

	CHECK(p == MAP_FAILED && errno == err, "%s: expected %s, got %s", what, strerror(err),
	      p == MAP_FAILED ? strerror(errno) : "a mapping");
	if (p != MAP_FAILED)
		munmap(p, len);
}

static void store_rel(__u64 *p, uint64_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELEASE);
}

static uint64_t load_acq(const __u64 *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

int main(int argc, char **argv)
{
	struct dm_repl_attach at = { 0 }, bad;
	struct dm_repl_ring_hdr *hdr;
	struct dm_repl_dirty dirty;
	unsigned long iterations = 20000, i, accepted = 0, refused = 0;
	uint64_t release, ack, prod, nr_regions;
	struct stat st;
	const char *dev;
	uint8_t *ro, *bitmap;
	size_t ro_len;
	int fd, fd2, r;

	rng_state = 0x9e3779b97f4a7c15ULL;
	if (argc < 2 || !strcmp(argv[1], "--help")) {
		fprintf(stderr, "usage: repl-hostile <dm-device> [--iterations N] [--seed S]\n");
		return 2;
	}
	dev = argv[1];
	for (int a = 2; a + 1 < argc; a += 2) {
		if (!strcmp(argv[a], "--iterations"))
			iterations = strtoul(argv[a + 1], NULL, 0);
		else if (!strcmp(argv[a], "--seed"))
			rng_state = strtoull(argv[a + 1], NULL, 0) | 1;
		else {
			fprintf(stderr, "repl-hostile: unknown option %s\n", argv[a]);
			return 2;
		}
	}
	if (stat(dev, &st) < 0 || !S_ISBLK(st.st_mode)) {
		fprintf(stderr, "repl-hostile: %s: not a block device\n", dev);
		return 2;
	}

	/* --- before attach */
	fd = ctl_open();
	expect_errno(fd, DM_REPL_IOC_KICK, NULL, ENOTCONN, "kick before attach");
	memset(&dirty, 0, sizeof(dirty));
	expect_errno(fd, DM_REPL_IOC_GET_DIRTY, &dirty, ENOTCONN, "get_dirty before attach");
	expect_mmap_fail(fd, 4096, PROT_READ, 0, ENOTCONN, "mmap before attach");
	expect_errno(fd, _IO(DM_REPL_IOC_MAGIC, 0x7f), NULL, ENOTCONN, "unknown ioctl before attach");

	/* --- bad attach arguments */
	bad = (struct dm_repl_attach){ .dev_major = major(st.st_rdev),
				       .dev_minor = minor(st.st_rdev),
				       .flags = 1 };
	expect_errno(fd, DM_REPL_IOC_ATTACH, &bad, EINVAL, "attach with flags");
	bad.flags = 0;
	bad.__pad = 7;
	expect_errno(fd, DM_REPL_IOC_ATTACH, &bad, EINVAL, "attach with padding set");
	bad = (struct dm_repl_attach){ .dev_major = 0xffffffff, .dev_minor = 0xffffffff };
	expect_errno(fd, DM_REPL_IOC_ATTACH, &bad, EINVAL, "attach to an impossible dev_t");
	bad = (struct dm_repl_attach){ .dev_major = 1, .dev_minor = 3 }; /* /dev/null */
	expect_errno(fd, DM_REPL_IOC_ATTACH, &bad, ENODEV, "attach to a device that is not repl");
	expect_errno(fd, DM_REPL_IOC_ATTACH, (void *)16, EFAULT, "attach with a bad pointer");

	/* --- attach */
	at.dev_major = major(st.st_rdev);
	at.dev_minor = minor(st.st_rdev);
	r = ioctl(fd, DM_REPL_IOC_ATTACH, &at);
	if (r < 0) {
		fprintf(stderr, "repl-hostile: attach %s: %s\n", dev, strerror(errno));
		return 2;
	}
	expect_errno(fd, DM_REPL_IOC_ATTACH, &at, EALREADY, "second attach on the same fd");
	fd2 = ctl_open();
	expect_errno(fd2, DM_REPL_IOC_ATTACH, &at, EBUSY, "second consumer");
	expect_errno(fd, _IO(DM_REPL_IOC_MAGIC, 0x7f), NULL, ENOTTY, "unknown ioctl");

	hdr = mmap(NULL, at.hdr_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (hdr == MAP_FAILED) {
		fprintf(stderr, "repl-hostile: mmap header: %s\n", strerror(errno));
		return 2;
	}
	CHECK(hdr->magic == DM_REPL_MAGIC, "magic %#x", hdr->magic);
	CHECK(hdr->abi_version == DM_REPL_ABI_VERSION, "abi %u", hdr->abi_version);
	ro_len = at.map_size - hdr->rec_offset;

	/* --- mappings the kernel must refuse */
	expect_mmap_fail(fd, ro_len, PROT_READ | PROT_WRITE, (off_t)hdr->rec_offset, EPERM,
			 "writable mapping of the records");
	expect_mmap_fail(fd, at.map_size, PROT_READ | PROT_WRITE, 0, EPERM,
			 "writable mapping of everything");
	expect_mmap_fail(fd, 4096, PROT_READ, (off_t)at.map_size, EINVAL, "mapping past the end");
	expect_mmap_fail(fd, at.map_size + 4096, PROT_READ, 0, EINVAL, "mapping longer than the ring");
	expect_mmap_fail(fd, 4096, PROT_READ, (off_t)1 << 46, EINVAL, "mapping at a huge offset");
	ro = mmap(NULL, ro_len, PROT_READ, MAP_SHARED, fd, (off_t)hdr->rec_offset);
	CHECK(ro != MAP_FAILED, "read-only mapping of the records: %s", strerror(errno));
	if (ro != MAP_FAILED) {
		CHECK(mprotect(ro, 4096, PROT_READ | PROT_WRITE) < 0 && errno == EACCES,
		      "mprotect of the records to writable must fail");
	}

	/* --- GET_DIRTY with bad buffers */
	memset(&dirty, 0, sizeof(dirty));
	CHECK(ioctl(fd, DM_REPL_IOC_GET_DIRTY, &dirty) == 0, "get_dirty (size query): %s", strerror(errno));
	nr_regions = dirty.nr_regions;
	CHECK(nr_regions > 0, "nr_regions %" PRIu64, nr_regions);
	dirty.bitmap_bytes = 1;
	dirty.bitmap = (uintptr_t)&dirty;
	if (nr_regions > 8)
		expect_errno(fd, DM_REPL_IOC_GET_DIRTY, &dirty, ENOSPC, "get_dirty, buffer too small");
	dirty.bitmap = 16;
	dirty.bitmap_bytes = (nr_regions + 7) / 8;
	expect_errno(fd, DM_REPL_IOC_GET_DIRTY, &dirty, EFAULT, "get_dirty, bad buffer");
	bitmap = calloc(1, (nr_regions + 7) / 8);
	dirty.bitmap = (uintptr_t)bitmap;
	CHECK(ioctl(fd, DM_REPL_IOC_GET_DIRTY, &dirty) == 0, "get_dirty: %s", strerror(errno));
	free(bitmap);

	/* --- scribble */
	for (i = 0; i < iterations; i++) {
		uint64_t kr = load_acq(&hdr->released_seq), ka = load_acq(&hdr->acked_seq);
		uint64_t v = rnd(), nkr, nka;
		__u64 junk = 0;
		uint32_t nr_recs = hdr->nr_recs;
		uint64_t data_size = hdr->data_size;
		bool expect_ok;

		prod = load_acq(&hdr->prod_seq);
		switch (v % 8) {
		case 0: /* valid: release and ack what is there */
			release = prod;
			ack = prod;
			break;
		case 1: /* backwards */
			release = kr ? kr - 1 - (v >> 8) % kr : UINT64_MAX;
			ack = ka;
			break;
		case 2: /* beyond prod */
			release = kr;
			ack = prod + 1 + (v >> 8) % 1000;
			break;
		case 3: /* wild */
			release = rnd();
			ack = rnd();
			break;
		case 4: /* the top bit */
			release = 1ULL << 63;
			ack = UINT64_MAX;
			break;
		default: /* garbage in the consumer-only fields and in the kernel's */
			hdr->read_seq = rnd();
			hdr->state_seen = (uint32_t)rnd();
			junk = 1;
			hdr->nr_recs = (uint32_t)rnd();	/* the kernel must never */
			hdr->data_size = rnd();		/* read these back */
			release = kr;
			ack = ka;
			break;
		}
		expect_ok = release >= kr && release <= prod && ack >= ka && ack <= prod;
		store_rel(&hdr->release_seq, release);
		store_rel(&hdr->ack_seq, ack);
		r = ioctl(fd, DM_REPL_IOC_KICK);
		if (junk) {
			hdr->nr_recs = nr_recs;
			hdr->data_size = data_size;
		}
		nkr = load_acq(&hdr->released_seq);
		nka = load_acq(&hdr->acked_seq);
		if (expect_ok) {
			CHECK(r == 0, "iteration %lu: valid release %" PRIu64 " ack %" PRIu64
				      " (prod %" PRIu64 ") refused: %s", i, release, ack, prod, strerror(errno));
			CHECK(nkr == release && nka == ack,
			      "iteration %lu: kernel kept %" PRIu64 "/%" PRIu64 " instead of %" PRIu64
			      "/%" PRIu64, i, nkr, nka, release, ack);
			accepted++;
		} else if (r < 0) {
			CHECK(errno == EINVAL, "iteration %lu: kick failed with %s", i, strerror(errno));
			refused++;
		}
		/* whatever happened, the kernel's view must stay sane */
		prod = load_acq(&hdr->prod_seq);
		CHECK(nkr >= kr && nka >= ka && nkr <= prod && nka <= prod,
		      "iteration %lu: kernel view went wrong: released %" PRIu64 " acked %" PRIu64
		      " (was %" PRIu64 "/%" PRIu64 ", prod %" PRIu64 ")", i, nkr, nka, kr, ka, prod);
		if (i % 1024 == 0) {
			struct pollfd p = { .fd = fd, .events = POLLIN | POLLPRI };

			CHECK(poll(&p, 1, 0) >= 0, "poll: %s", strerror(errno));
		}
	}
	CHECK(refused > 0, "no invalid value was refused in %lu iterations", iterations);

	/*
	 * --- the kernel's prod_seq in the header is the kernel's: scribbling a
	 * huge value there must not let a release beyond the real prod through
	 * (done last: the header's prod is unreliable until the next record)
	 */
	{
		uint64_t kr = load_acq(&hdr->released_seq), ka = load_acq(&hdr->acked_seq);

		store_rel(&hdr->prod_seq, UINT64_MAX / 2);
		store_rel(&hdr->release_seq, UINT64_MAX / 4);
		store_rel(&hdr->ack_seq, ka);
		CHECK(ioctl(fd, DM_REPL_IOC_KICK) < 0 && errno == EINVAL,
		      "a release beyond the real prod was accepted after prod_seq was scribbled");
		CHECK(load_acq(&hdr->released_seq) < UINT64_MAX / 4, "kernel released %llu",
		      (unsigned long long)load_acq(&hdr->released_seq));
		/* sane values back: what the kernel accepted last */
		hdr->read_seq = kr;
		store_rel(&hdr->release_seq, load_acq(&hdr->released_seq));
		store_rel(&hdr->ack_seq, load_acq(&hdr->acked_seq));
		CHECK(ioctl(fd, DM_REPL_IOC_KICK) == 0, "kick with sane values: %s", strerror(errno));
	}
	printf("repl-hostile: %lu iterations, %lu valid accepted, %lu invalid refused, %d failures\n",
	       iterations, accepted, refused, failures);
	close(fd2);
	return failures ? 1 : 0;
}
