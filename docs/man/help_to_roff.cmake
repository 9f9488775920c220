# Turns a --help page written as a manual page into roff, so that the
# installed page is the program's own text and cannot drift from it.
# help2man cannot: it reads a GNU-style option list, and gpulimit's --help
# is a whole page already (tools/cli/common/help_text.cpp).
#
#   cmake -DPROGRAM=path -DTITLE=GPULIMIT -DSECTION=1 -DVERSION=0.1.0
#         -DOUTPUT=gpulimit.1 -P help_to_roff.cmake
#
# The page's shape: a line at column 0 in capitals starts a section; in a
# section, a line indented 4 that is followed by one indented 8 is a term
# (an option, a variable, a file, an example) and the lines indented 8 are
# its description; other lines indented 4 are paragraphs, blank lines
# separate paragraphs. SYNOPSIS and EXIT STATUS are laid out by hand and kept
# as they are.
foreach(required PROGRAM TITLE SECTION VERSION OUTPUT)
  if(NOT DEFINED ${required})
    message(FATAL_ERROR "help_to_roff.cmake: -D${required}=... is missing")
  endif()
endforeach()

execute_process(COMMAND "${PROGRAM}" --help
                OUTPUT_VARIABLE page RESULT_VARIABLE status ERROR_VARIABLE errors)
if(NOT status EQUAL 0 OR page STREQUAL "")
  message(FATAL_ERROR "${PROGRAM} --help failed (${status}): ${errors}")
endif()

# Text as roff prints it: backslashes and hyphens escaped (so an option
# such as --mem can be copied from the rendered page), and no line taken
# for a request.
function(roff_text text out)
  string(REPLACE "\\" "\\e" text "${text}")
  string(REPLACE "-" "\\-" text "${text}")
  if(text MATCHES "^[.']")
    set(text "\\&${text}")
  endif()
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

set(roff ".\\\" Generated from ${TITLE} --help by docs/man/help_to_roff.cmake; edit the help text.\n")
string(APPEND roff ".TH ${TITLE} ${SECTION} \"\" \"${VERSION}\"\n")

# Lines one by one. (Not as a CMake list: the text has ';', '[' and ']'.)
set(lines_left "${page}")
set(section "")
set(verbatim OFF)
set(paragraph_break OFF)
set(previous_indent 0)
while(NOT lines_left STREQUAL "")
  string(FIND "${lines_left}" "\n" newline)
  if(newline EQUAL -1)
    set(line "${lines_left}")
    set(lines_left "")
  else()
    string(SUBSTRING "${lines_left}" 0 ${newline} line)
    math(EXPR after "${newline} + 1")
    string(SUBSTRING "${lines_left}" ${after} -1 lines_left)
  endif()
  # The next line, to tell a term from a paragraph.
  string(FIND "${lines_left}" "\n" next_newline)
  string(SUBSTRING "${lines_left}" 0 ${next_newline} next_line)

  if(line MATCHES "^[A-Z][A-Z ]*$")
    if(verbatim)
      string(APPEND roff ".fi\n")
    endif()
    string(APPEND roff ".SH ${line}\n")
    set(section "${line}")
    set(verbatim OFF)
    if(section STREQUAL "SYNOPSIS" OR section STREQUAL "EXIT STATUS")
      string(APPEND roff ".nf\n")
      set(verbatim ON)
    endif()
    set(paragraph_break OFF)
    continue()
  endif()

  if(verbatim)
    if(line MATCHES "^    ")
      string(SUBSTRING "${line}" 4 -1 line)
    endif()
    # Leading blanks kept as unpaddable spaces, which roff never squeezes.
    set(indent_length 0)
    if(line MATCHES "^( +)")
      string(LENGTH "${CMAKE_MATCH_1}" indent_length)
    endif()
    string(SUBSTRING "${line}" ${indent_length} -1 line)
    roff_text("${line}" text)
    string(REPEAT "\\ " ${indent_length} indent)
    set(text "${indent}${text}")
    if(text STREQUAL "")
      set(text ".sp")
    endif()
    string(APPEND roff "${text}\n")
    continue()
  endif()

  if(line MATCHES "^[ ]*$")
    set(paragraph_break ON)
    continue()
  endif()
  if(line MATCHES "^        [^ ]")
    string(SUBSTRING "${line}" 8 -1 line)
    roff_text("${line}" text)
    if(paragraph_break)
      string(APPEND roff ".IP\n")
    endif()
    string(APPEND roff "${text}\n")
  elseif(line MATCHES "^    [^ ]")
    string(SUBSTRING "${line}" 4 -1 line)
    roff_text("${line}" text)
    if(next_line MATCHES "^        [^ ]")
      string(APPEND roff ".TP\n\\fB${text}\\fR\n")
    else()
      if(paragraph_break)
        string(APPEND roff ".PP\n")
      endif()
      string(APPEND roff "${text}\n")
    endif()
  else()
    # Any other indent: text of the paragraph it is in, as filled text.
    string(STRIP "${line}" line)
    roff_text("${line}" text)
    string(APPEND roff "${text}\n")
  endif()
  set(paragraph_break OFF)
endwhile()
if(verbatim)
  string(APPEND roff ".fi\n")
endif()

file(WRITE "${OUTPUT}" "${roff}")
