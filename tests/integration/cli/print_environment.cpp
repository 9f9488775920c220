// Prints its environment, one NAME=value per line: what a job started by
// gpulimit was given.
#include <cstdio>

extern char** environ;

int main() {
  for (char** entry = environ; *entry; ++entry)
    std::puts(*entry);
  return 0;
}
