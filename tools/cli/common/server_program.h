// Which gpulimitd gpulimit starts when the user's own server is not running.
#pragma once

#include <string>

namespace gpulimit::cli {

// The absolute path of gpulimitd, the first that exists of:
//  - $GPULIMIT_SERVER, when set (then it must exist; a bare name is looked
//    up in PATH);
//  - <directory of gpulimit>/gpulimitd, the installed layout;
//  - the server of gpulimit's build tree, for a gpulimit run from there.
// False with `error` set to one line when there is none.
bool find_server_program(std::string& path, std::string& error);

}  // namespace gpulimit::cli
