#include <linux/nvme_ioctl.h>
