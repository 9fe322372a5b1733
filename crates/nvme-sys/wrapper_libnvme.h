#include <libnvme.h>
