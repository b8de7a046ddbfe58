// SPDX-License-Identifier: GPL-2.0
/*
 * dm-repl: /dev/dm-repl, the misc device through which the replication
 * daemon reaches the ring of one repl device (dm-repl-ring.c):
 * DM_REPL_IOC_ATTACH, mmap of the shared area, poll, the DM_REPL_IOC_KICK
 * doorbell after it has stored release_seq / ack_seq, and the dirty-bitmap
 * ioctls of a resync.  The ABI is in include/uapi/linux/dm-repl.h.
 *
 * A file attaches to one ring, once; it then holds a reference to it (as
 * does every mapping), so the ring outlives its device while userspace
 * still has it mapped (poll reports EPOLLHUP).  Every ioctl argument and
 * mmap offset is checked here before the ring sees it.
 *
 * Locking: repl_file.lock protects the file's ring pointer (set once by
 * ATTACH); everything else is the ring's (see dm-repl-ring.c).
 */
#include <linux/module.h>
#include <linux/miscdevice.h>
#include <linux/fs.h>
#include <linux/capability.h>
#include <linux/mm.h>
#include <linux/poll.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>
#include <linux/mutex.h>

#include "dm-repl-core.h"

struct repl_file {
	struct mutex lock;		/* protects ring */
	struct repl_ring *ring;		/* set once by ATTACH */
};

static int repl_open(struct inode *inode, struct file *file)
{
	struct repl_file *rf;

	rf = kzalloc(sizeof(*rf), GFP_KERNEL);
	if (!rf)
		return -ENOMEM;
	mutex_init(&rf->lock);
	file->private_data = rf;
	return 0;
}

static int repl_release(struct inode *inode, struct file *file)
{
	struct repl_file *rf = file->private_data;

	if (rf->ring)
		repl_ring_detach(rf->ring);
	kfree(rf);
	return 0;
}

static struct repl_ring *repl_file_ring(struct file *file)
{
	struct repl_file *rf = file->private_data;
	struct repl_ring *ring;

	mutex_lock(&rf->lock);
	ring = rf->ring;
	mutex_unlock(&rf->lock);
	return ring;
}

/*
 * The consumer of a ring sees every write of the device and decides what
 * the peers get and when sync writes complete: as much as the device
 * itself, so it takes what dm's own ioctls take (CAP_SYS_ADMIN), not only
 * the permission to open /dev/dm-repl.
 */
static int repl_attach(struct file *file, void __user *argp)
{
	struct repl_file *rf = file->private_data;
	struct dm_repl_attach at;
	struct repl_ring *ring;
	int r = 0;

	if (!capable(CAP_SYS_ADMIN))
		return -EPERM;
	if (copy_from_user(&at, argp, sizeof(at)))
		return -EFAULT;
	if (at.flags || at.__pad)
		return -EINVAL;
	if (at.dev_major >= (1U << (32 - MINORBITS)) ||
	    at.dev_minor > MINORMASK)
		return -EINVAL;

	mutex_lock(&rf->lock);
	if (rf->ring) {
		r = -EALREADY;
		goto out_unlock;
	}
	r = repl_ring_attach(MKDEV(at.dev_major, at.dev_minor), &ring);
	if (r)
		goto out_unlock;
	rf->ring = ring;
	at.map_size = ring->area_size;
	at.hdr_size = PAGE_SIZE;
out_unlock:
	mutex_unlock(&rf->lock);
	if (!r && copy_to_user(argp, &at, sizeof(at)))
		r = -EFAULT;	/* stays attached; close the fd to detach */
	return r;
}

static int repl_get_dirty(struct repl_ring *ring, void __user *argp)
{
	struct dm_repl_dirty d;
	int r;

	if (copy_from_user(&d, argp, sizeof(d)))
		return -EFAULT;
	r = repl_ring_copy_dirty(ring, u64_to_user_ptr(d.bitmap), d.bitmap_bytes,
				 &d.dirty_regions, &d.dirty_gen, &d.nr_regions);
	if (r)
		return r;
	d.region_bytes = 1ULL << ring->region_shift;
	if (copy_to_user(argp, &d, sizeof(d)))
		return -EFAULT;
	return 0;
}

/*
 * MARK_DIRTY / CLEAR_DIRTY.  Marking more than needed only costs a resync;
 * clearing is refused (EAGAIN) when anything was marked since the caller
 * copied the bitmap, so a region dirtied during its resync stays dirty.
 */
static int repl_mark_dirty(struct repl_ring *ring, void __user *argp, bool clear)
{
	struct dm_repl_regions rg;

	if (copy_from_user(&rg, argp, sizeof(rg)))
		return -EFAULT;
	if (rg.flags || rg.__pad || (!clear && rg.gen))
		return -EINVAL;
	if (!rg.count || rg.first >= ring->nr_regions ||
	    rg.count > ring->nr_regions - rg.first)
		return -EINVAL;
	if (clear)
		return repl_ring_clear_regions(ring, rg.first, rg.count, rg.gen);
	repl_ring_mark_regions(ring, rg.first, rg.count);
	return 0;
}

static long repl_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	void __user *argp = (void __user *)arg;
	struct repl_ring *ring;

	if (cmd == DM_REPL_IOC_ATTACH)
		return repl_attach(file, argp);

	ring = repl_file_ring(file);
	if (!ring)
		return -ENOTCONN;
	switch (cmd) {
	case DM_REPL_IOC_KICK:
		return repl_ring_kick(ring);
	case DM_REPL_IOC_GET_DIRTY:
		return repl_get_dirty(ring, argp);
	case DM_REPL_IOC_MARK_DIRTY:
		return repl_mark_dirty(ring, argp, false);
	case DM_REPL_IOC_CLEAR_DIRTY:
		return repl_mark_dirty(ring, argp, true);
	default:
		return -ENOTTY;
	}
}

static __poll_t repl_poll(struct file *file, poll_table *wait)
{
	struct repl_ring *ring = repl_file_ring(file);
	struct dm_repl_ring_hdr *hdr;
	__poll_t mask = 0;

	if (!ring)
		return EPOLLERR;
	hdr = ring->hdr;
	poll_wait(file, &ring->poll_wq, wait);
	/*
	 * Order the consumer's read_seq store (made before it called poll)
	 * before our load of prod; pairs with smp_mb() in ring_commit().
	 */
	smp_mb();
	if (READ_ONCE(ring->prod) > READ_ONCE(hdr->read_seq))
		mask |= EPOLLIN | EPOLLRDNORM;
	if (READ_ONCE(hdr->state_seq) != READ_ONCE(hdr->state_seen))
		mask |= EPOLLPRI;
	if (READ_ONCE(ring->dead))
		mask |= EPOLLHUP;
	return mask;
}

static void repl_vm_open(struct vm_area_struct *vma)
{
	repl_ring_kref_get(vma->vm_private_data);
}

static void repl_vm_close(struct vm_area_struct *vma)
{
	repl_ring_kref_put(vma->vm_private_data);
}

static const struct vm_operations_struct repl_vm_ops = {
	.open = repl_vm_open,
	.close = repl_vm_close,
};

/*
 * Offset 0, exactly the header page: read-write.  Anything else inside the
 * area: read-only (records and payloads are the kernel's).
 */
static int repl_mmap(struct file *file, struct vm_area_struct *vma)
{
	struct repl_ring *ring = repl_file_ring(file);
	unsigned long len = vma->vm_end - vma->vm_start;
	unsigned long off;
	int r;

	if (!ring)
		return -ENOTCONN;
	if (vma->vm_pgoff > (ring->area_size >> PAGE_SHIFT))
		return -EINVAL;
	off = vma->vm_pgoff << PAGE_SHIFT;
	if (len > ring->area_size - off)
		return -EINVAL;
	if (off || len != PAGE_SIZE) {
		if (vma->vm_flags & VM_WRITE)
			return -EPERM;
		vma->vm_flags &= ~VM_MAYWRITE;
	}
	vma->vm_flags |= VM_DONTCOPY;
	r = remap_vmalloc_range(vma, ring->area, vma->vm_pgoff);
	if (r)
		return r;
	vma->vm_private_data = ring;
	vma->vm_ops = &repl_vm_ops;
	repl_ring_kref_get(ring);
	return 0;
}

static const struct file_operations repl_fops = {
	.owner = THIS_MODULE,
	.open = repl_open,
	.release = repl_release,
	.unlocked_ioctl = repl_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.poll = repl_poll,
	.mmap = repl_mmap,
	.llseek = noop_llseek,
};

static struct miscdevice repl_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = DM_REPL_MISC_NAME,
	.fops = &repl_fops,
	.mode = 0600,
};

/* Module init and exit (dm-repl-target.c). */
int repl_dev_register(void)
{
	return misc_register(&repl_misc);
}

void repl_dev_unregister(void)
{
	misc_deregister(&repl_misc);
}
